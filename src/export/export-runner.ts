import { join, resolve } from 'node:path';
import type { Writable } from 'node:stream';
import type { Logger } from 'pino';
import type { EnvConfig } from '../config/env';
import { createSqlStore } from '../stores/sql/sql-store.factory';
import { DirectoryDestination } from './directory.destination';
import type { ExportDestination } from './export-destination';
import { ExportKind, SCHEMAS } from './export-schema';
import { ExportSource, KeysetExportSource, postgresExportSource } from './export-source';
import { Exporter, ExportMode, ExportSummary } from './exporter';
import type { ExportFormat } from './formats/record-encoder';
import { StreamDestination } from './stream.destination';

/** `gateway export` as parsed (README "Decisions export"; src/cli/export.command.ts checks the combinations). */
export interface ExportCommand {
  kinds: ExportKind[];
  format: ExportFormat;
  /** A directory (one folder per kind inside it); none: standard output. */
  out?: string;
  since?: Date;
  until?: Date;
  follow: boolean;
  orgId?: string;
  cursorFile?: string;
  rotateBytes: number;
  rotateSeconds: number;
  batchRows: number;
  rowGroupRows: number;
  pollSeconds: number;
}

export interface ExportDeps {
  env: Pick<EnvConfig, 'databaseUrl' | 'dataDir'>;
  stdout: Writable;
  log: Logger;
  signal?: AbortSignal;
}

export function exportMode(c: Pick<ExportCommand, 'since' | 'until' | 'follow'>): ExportMode {
  if (c.follow) return 'follow';
  return c.since || c.until ? 'once' : 'catch-up';
}

/**
 * Opens the analytics store the export's own way and runs it: Postgres on a pool of one connection
 * that migrates nothing (the gateway does; a sidecar started first waits for it), or the embedded
 * store (which the export opens, migrates and locks like any command: the server must be stopped).
 */
export async function runExport(c: ExportCommand, deps: ExportDeps): Promise<ExportSummary> {
  const mode = exportMode(c);
  const source: ExportSource = deps.env.databaseUrl
    ? postgresExportSource(deps.env.databaseUrl)
    : new KeysetExportSource(await createSqlStore({ dataDir: deps.env.dataDir } as EnvConfig), true);
  try {
    const jobs = c.kinds.map((kind) => {
      const schema = SCHEMAS[kind];
      const encoder = { rowGroupRows: c.rowGroupRows };
      const destination: ExportDestination = c.out
        ? new DirectoryDestination({
            dir: join(resolve(c.out), kind),
            schema,
            format: c.format,
            rotateBytes: c.rotateBytes,
            rotateMs: c.rotateSeconds * 1000,
            cursor: mode !== 'once',
            encoder,
            onFile: (f) => deps.log.info({ kind, file: f.name, rows: f.rows, bytes: f.bytes }, 'export file complete'),
          })
        : new StreamDestination({ stream: deps.stdout, schema, format: c.format, cursorFile: mode === 'once' ? undefined : c.cursorFile, encoder });
      return { schema, destination };
    });
    const exporter = new Exporter(source, {
      mode,
      orgId: c.orgId,
      since: c.since,
      until: c.until,
      batchRows: c.batchRows,
      pollMs: c.pollSeconds * 1000,
      signal: deps.signal,
      log: deps.log,
    });
    return await exporter.run(jobs);
  } finally {
    await source.close();
  }
}
