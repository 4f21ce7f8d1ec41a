import { Command, InvalidArgumentError, Option } from 'commander';
import pino from 'pino';
import { createLogger } from '../common/logging/logger';
import { loadStoreEnv } from '../config/env';
import { EXPORT_KINDS, ExportKind } from '../export/export-schema';
import { exportMode, runExport, type ExportCommand } from '../export/export-runner';
import { DEFAULT_ROW_GROUP_ROWS } from '../export/formats/parquet.encoder';
import { EXPORT_FORMATS, ExportFormat } from '../export/formats/record-encoder';

/** A UTC day (YYYY-MM-DD, its 00:00 UTC) or an ISO 8601 time with its offset. */
function timeArg(value: string): Date {
  const day = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
  const at = day ? new Date(Date.UTC(Number(day[1]), Number(day[2]) - 1, Number(day[3]))) : new Date(value);
  if (Number.isNaN(at.getTime()) || (!day && !/(Z|[+-]\d{2}:?\d{2})$/i.test(value))) {
    throw new InvalidArgumentError('give a UTC day (YYYY-MM-DD) or an ISO 8601 time with its offset (e.g. 2026-01-31T12:00:00Z)');
  }
  return at;
}

const UNITS: Record<string, number> = { '': 1, k: 1024, kib: 1024, m: 1024 ** 2, mib: 1024 ** 2, g: 1024 ** 3, gib: 1024 ** 3 };

function bytesArg(value: string): number {
  const m = /^(\d+)\s*([a-z]*)$/i.exec(value.trim());
  const unit = m ? UNITS[m[2].toLowerCase()] : undefined;
  const n = m && unit ? Number(m[1]) * unit : NaN;
  if (!Number.isSafeInteger(n) || n < 1024) throw new InvalidArgumentError('a size of at least 1024 bytes, e.g. 134217728, 128MiB or 1GiB');
  return n;
}

const intArg = (min: number, max: number) => (value: string): number => {
  const n = /^\d+$/.test(value) ? Number(value) : NaN;
  if (!(n >= min && n <= max)) throw new InvalidArgumentError(`an integer from ${min} to ${max}`);
  return n;
};

function kindsArg(value: string): ExportKind[] {
  const list = value.split(',').map((s) => s.trim()).filter(Boolean);
  const bad = list.find((k) => !(EXPORT_KINDS as readonly string[]).includes(k));
  if (bad || list.length === 0) throw new InvalidArgumentError(`a comma list of ${EXPORT_KINDS.join(', ')}`);
  return [...new Set(list)] as ExportKind[];
}

interface Opts {
  kind: ExportKind[];
  format: ExportFormat;
  out?: string;
  since?: Date;
  until?: Date;
  follow?: boolean;
  org?: string;
  cursorFile?: string;
  rotateBytes: number;
  rotateSeconds: number;
  batchRows: number;
  rowGroupRows: number;
  pollSeconds: number;
}

/** Refusals of option combinations, before the store is opened. */
function check(o: Opts, fail: (message: string) => Error): void {
  if (o.follow && o.until) throw fail('--follow runs until stopped: it takes no --until');
  if (o.since && o.until && o.since.getTime() >= o.until.getTime()) throw fail('--since must be before --until');
  if (!o.out) {
    if (o.kind.length > 1) throw fail('standard output takes one --kind at a time (a directory takes several)');
    if (o.format === 'parquet' && o.follow) throw fail('Parquet to standard output is one file: not with --follow (use --out DIR)');
  }
  if (o.out && o.cursorFile) throw fail('--cursor-file is for standard output; a directory keeps its cursor inside itself');
  if (o.cursorFile && (o.since || o.until)) throw fail('--since/--until dumps keep no cursor: not with --cursor-file');
}

/**
 * `gateway export` (README "Decisions export"; docs/operations.md "Decisions export"): decision
 * traces, experiment lifecycle events and key audit rows out of the analytics store, as NDJSON, CSV or
 * Parquet, to standard output or to a directory of rotated files; `--follow` keeps running beside the
 * gateway (a sidecar) and resumes from its cursor after a restart. Logs go to standard error.
 */
export function addExportCommand(program: Command, out: (s: string) => void, fail: (message: string) => Error): void {
  program
    .command('export')
    .description('export decision traces, experiment events and key audit rows (NDJSON, CSV or Parquet) to stdout or a directory; --follow runs as a sidecar')
    .addOption(new Option('--kind <list>', `comma list of ${EXPORT_KINDS.join(', ')}`).argParser(kindsArg).default(['traces']))
    .addOption(new Option('--format <format>', 'output format').choices(EXPORT_FORMATS).default('ndjson'))
    .option('--out <dir>', 'write files into <dir>/<kind>/ (rotated, renamed when complete, cursor kept there); default: standard output')
    .option('--since <time>', 'one-off dump of rows created at or after this UTC day or time (with --follow: only such rows)', timeArg)
    .option('--until <time>', 'one-off dump of rows created before this UTC day or time', timeArg)
    .option('--follow', 'keep running and export new rows as they are committed (resumes from the cursor)')
    .option('--org <org>', 'only this organisation')
    .option('--cursor-file <file>', 'standard output: keep the position in this file between runs (at least once)')
    .option('--rotate-bytes <size>', 'complete a file once it holds this much (e.g. 128MiB)', bytesArg, 128 * 1024 ** 2)
    .option('--rotate-seconds <n>', 'complete a file once it has been open this long', intArg(1, 86_400), 300)
    .option('--batch-rows <n>', 'rows per read from the store', intArg(1, 100_000), 5_000)
    .option('--row-group-rows <n>', 'Parquet rows per row group (memory holds one)', intArg(1, 1_000_000), DEFAULT_ROW_GROUP_ROWS)
    .option('--poll-seconds <n>', 'with --follow: pause when nothing is new', intArg(1, 3_600), 1)
    .action(async (o: Opts) => {
      check(o, fail);
      const env = loadStoreEnv();
      // The embedded store is one process's: a sidecar holding it would keep the gateway from starting.
      if (o.follow && !env.databaseUrl) throw fail('--follow needs DATABASE_URL: the embedded store can be open in one process only (stop the server for a one-off export)');
      // Standard output may be the data: every log line goes to standard error.
      const log = createLogger(env.logLevel, pino.destination({ dest: 2, sync: false }));
      const command: ExportCommand = {
        kinds: o.kind,
        format: o.format,
        out: o.out,
        since: o.since,
        until: o.until,
        follow: o.follow === true,
        orgId: o.org,
        cursorFile: o.cursorFile,
        rotateBytes: o.rotateBytes,
        rotateSeconds: o.rotateSeconds,
        batchRows: o.batchRows,
        rowGroupRows: o.rowGroupRows,
        pollSeconds: o.pollSeconds,
      };
      const stop = new AbortController();
      const onSignal = () => stop.abort();
      process.on('SIGTERM', onSignal);
      process.on('SIGINT', onSignal);
      try {
        log.info({ mode: exportMode(command), kinds: command.kinds, format: command.format, out: command.out ?? 'stdout' }, 'export starts');
        const summary = await runExport(command, { env, stdout: process.stdout, log, signal: stop.signal });
        for (const k of summary.kinds) {
          const line = `${k.kind}: ${k.rows} rows exported; position ${k.position}`;
          if (command.out) out(`${line}\n`);
          else log.info({ kind: k.kind, rows: k.rows, position: k.position }, 'export done');
        }
      } finally {
        process.off('SIGTERM', onSignal);
        process.off('SIGINT', onSignal);
      }
    });
}
