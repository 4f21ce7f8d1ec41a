/**
 * `gateway export` through the CLI itself (runCli, in process; README "Decisions export"): option
 * combinations refused before the store is opened (exit 1, one line) or by the parser (exit 2); on the
 * embedded store, NDJSON to standard output and files into a directory, with the summary line.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../src/cli/main';
import { loadEnv } from '../src/config/env';
import { createSqlStore } from '../src/stores/sql/sql-store.factory';

jest.setTimeout(120_000);

const CLI_ENV = ['GATEWAY_CONFIG', 'GATEWAY_DATA_DIR', 'DATABASE_URL', 'REDIS_URL', 'VECTOR_DATABASE_URL', 'GATEWAY_KEY_PEPPER', 'LOG_LEVEL'];

/** runCli with stdout/stderr captured and `env` as the only CLI variables set. */
async function cli(argv: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const saved = Object.fromEntries([...CLI_ENV, ...Object.keys(env)].map((k) => [k, process.env[k]]));
  for (const k of CLI_ENV) delete process.env[k];
  Object.assign(process.env, { LOG_LEVEL: 'error', ...env });
  const out: string[] = [];
  const err: string[] = [];
  const stdoutWrite = process.stdout.write;
  const stderrWrite = process.stderr.write;
  const capture = (sink: string[]) =>
    ((chunk: string | Uint8Array, ...rest: unknown[]) => {
      sink.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
      (rest.find((r) => typeof r === 'function') as (() => void) | undefined)?.();
      return true;
    }) as typeof process.stdout.write;
  process.stdout.write = capture(out);
  process.stderr.write = capture(err);
  try {
    const code = await runCli(argv);
    return { code, stdout: out.join(''), stderr: err.join('') };
  } finally {
    process.stdout.write = stdoutWrite;
    process.stderr.write = stderrWrite;
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

const tmp = mkdtempSync(join(tmpdir(), 'gw-export-cli-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('gateway export: refusals', () => {
  it.each([
    [['export', '--follow', '--until', '2026-01-01'], '--follow runs until stopped: it takes no --until'],
    [['export', '--since', '2026-02-01', '--until', '2026-01-01'], '--since must be before --until'],
    [['export', '--kind', 'traces,events'], 'standard output takes one --kind at a time (a directory takes several)'],
    [['export', '--format', 'parquet', '--follow'], 'Parquet to standard output is one file: not with --follow (use --out DIR)'],
    [['export', '--out', '/tmp/x', '--cursor-file', '/tmp/c'], '--cursor-file is for standard output; a directory keeps its cursor inside itself'],
    [['export', '--follow', '--out', '/tmp/x'], '--follow needs DATABASE_URL: the embedded store can be open in one process only (stop the server for a one-off export)'],
  ])('%j', async (argv, message) => {
    const r = await cli(argv, { GATEWAY_DATA_DIR: join(tmp, 'never-opened') });
    expect(r).toEqual({ code: 1, stdout: '', stderr: `gateway: ${message}\n` });
    expect(readdirSync(tmp)).not.toContain('never-opened');
  });

  it.each([
    [['export', '--format', 'xml']],
    [['export', '--kind', 'feedback']],
    [['export', '--since', 'yesterday']],
    [['export', '--rotate-bytes', '10']],
  ])('%j is a usage error (exit 2)', async (argv) => {
    expect((await cli(argv)).code).toBe(2);
  });
});

describe('gateway export on the embedded store', () => {
  const dataDir = join(tmp, 'data');

  beforeAll(async () => {
    // The store as the gateway leaves it: migrated, with traces and a key audit row in it.
    const store = await createSqlStore(loadEnv({ GATEWAY_DATA_DIR: dataDir }));
    try {
      await store.query(
        `INSERT INTO decision_traces (created_at, id, latency_ms, status, request_id, org_id, api_key_id, endpoint, requested_model, selected_model)
         SELECT now() - g * interval '1 minute', 100 + g, 5, 200, 'cli-' || g, 'org-' || (g % 2), 'k', 'chat', 'auto', 'm1' FROM generate_series(1, 25) g`,
        [],
      );
      await store.query(`INSERT INTO key_audit (org_id, key_id, action, actor) VALUES ('org-0', 'k', 'created', 'cli')`, []);
    } finally {
      await store.close();
    }
  });

  it('NDJSON to standard output, one organisation', async () => {
    const r = await cli(['export', '--org', 'org-1'], { GATEWAY_DATA_DIR: dataDir });
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines).toHaveLength(13);
    expect(lines.every((l) => l.org_id === 'org-1' && l.schema_version === 1)).toBe(true);
    // Oldest first.
    expect(lines.map((l) => l.request_id)).toEqual(Array.from({ length: 13 }, (_, i) => `cli-${25 - 2 * i}`));
  });

  it('CSV files into a directory, with the summary line; a second run has nothing new', async () => {
    const out = join(tmp, 'out');
    const r = await cli(['export', '--kind', 'traces,key_audit', '--format', 'csv', '--out', out], { GATEWAY_DATA_DIR: dataDir });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^traces: 25 rows exported; position \d+\nkey_audit: 1 rows exported; position \d+\n$/);
    const [file] = readdirSync(join(out, 'traces')).filter((f) => f.startsWith('part-'));
    expect(readFileSync(join(out, 'traces', file), 'utf8').trim().split('\r\n')).toHaveLength(26);
    const again = await cli(['export', '--kind', 'traces,key_audit', '--format', 'csv', '--out', out], { GATEWAY_DATA_DIR: dataDir });
    expect(again.stdout).toMatch(/^traces: 0 rows exported; position \d+\nkey_audit: 0 rows exported; position \d+\n$/);
  });
});
