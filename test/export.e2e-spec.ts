/**
 * The decisions export (docs/operations.md "Decisions export"), on PGlite and on real Postgres: what
 * DuckDB reads back from the Parquet, NDJSON and CSV files equals the store, count and sums per
 * model, status and arm; experiment events and key audit rows alike; a second pass into the same
 * directory exports only what is new, including traces inserted late with a created_at days old;
 * standard output with a cursor file resumes where it stopped. On Postgres, a trace whose transaction
 * was still open when a later one committed is exported once it commits, neither skipped nor twice.
 */
import { DuckDBInstance } from '@duckdb/node-api';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { Client } from 'pg';
import { DirectoryDestination } from '../src/export/directory.destination';
import { ExportKind, SCHEMAS } from '../src/export/export-schema';
import { ExportSource, KeysetExportSource } from '../src/export/export-source';
import { PgExportSource } from '../src/export/pg-export-source';
import { Exporter, ExportMode } from '../src/export/exporter';
import type { ExportFormat } from '../src/export/formats/record-encoder';
import { StreamDestination } from '../src/export/stream.destination';
import { PgSqlStore } from '../src/stores/sql/pg-sql.store';
import type { SqlStore } from '../src/stores/sql/sql-store';
import { createTestPglite } from './support/pglite';
import { createTestDatabase, TestDatabase } from './support/postgres';
import { TEST_DATABASE_URL } from './support/real-servers';

jest.setTimeout(120_000);

const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
const MODELS = ['m1', 'm2', 'm3', 'm4', 'm5'];

/**
 * Traces g in [$1, $2): model g % 5, status 200 but every 7th 502 and every 11th 429, arm baseline /
 * candidate / none by g % 3, created at $3 minus g seconds. Costs are multiples of 1/8 and latencies
 * whole milliseconds, so sums are exact whatever order a reader adds them in.
 */
const INSERT_TRACES = `
  INSERT INTO decision_traces (created_at, id, latency_ms, ttft_ms, cost_usd, status, attempts, prompt_tokens, completion_tokens,
    fallback_used, request_id, org_id, api_key_id, session_id, endpoint, requested_model, route, strategy,
    selected_provider, selected_model, experiment_arm, error_code, finish_reason, candidates, failed_attempts)
  SELECT $3::timestamptz - g * interval '1 second', 1000000000 + g, 10 + g % 90, CASE WHEN g % 2 = 0 THEN 5 END, (g % 8) * 0.125,
         CASE WHEN g % 7 = 0 THEN 502 WHEN g % 11 = 0 THEN 429 ELSE 200 END, 1, 100 + g % 50, 20 + g % 30, g % 13 = 0,
         'req-' || g, 'org-' || (g % 2), 'key-' || (g % 2), 'sess-' || (g / 4), 'chat', 'auto', 'default', 'ordered',
         'mock', 'm' || (1 + g % 5), (ARRAY['baseline', 'candidate', NULL])[1 + g % 3],
         CASE WHEN g % 7 = 0 THEN 'upstream_error' END, CASE WHEN g % 7 = 0 THEN NULL ELSE 'stop' END,
         jsonb_build_array(jsonb_build_object('provider', 'mock', 'model', 'm' || (1 + g % 5), 'score', 0.5)),
         CASE WHEN g % 7 = 0 THEN jsonb_build_array(jsonb_build_object('provider', 'mock', 'model', 'm1', 'error', 'status', 'status', 502)) END
  FROM generate_series($1::bigint, $2::bigint - 1) g`;

const STORE_FIGURES = `
  SELECT selected_model AS model, status, coalesce(experiment_arm, '-') AS arm, count(*)::int AS n,
         sum(cost_usd)::float8 AS cost, sum(latency_ms)::float8 AS latency, sum(prompt_tokens)::int AS tokens
  FROM decision_traces GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`;

interface Figures {
  model: string;
  status: number;
  arm: string;
  n: number;
  cost: number;
  latency: number;
  tokens: number;
}

const normalise = (rows: Array<Record<string, unknown>>): Figures[] =>
  rows.map((r) => ({ model: String(r.model), status: Number(r.status), arm: String(r.arm), n: Number(r.n), cost: Number(r.cost), latency: Number(r.latency), tokens: Number(r.tokens) }));

let duck: Awaited<ReturnType<DuckDBInstance['connect']>>;
beforeAll(async () => {
  duck = await (await DuckDBInstance.create(':memory:')).connect();
});

async function duckRows(sql: string): Promise<Array<Record<string, unknown>>> {
  return (await duck.runAndReadAll(sql)).getRowObjects() as Array<Record<string, unknown>>;
}

/** How DuckDB reads every file of a format in a folder. */
function reader(dir: string, format: ExportFormat): string {
  const glob = `'${join(dir, `part-*.${format}`)}'`;
  if (format === 'parquet') return `read_parquet(${glob})`;
  if (format === 'ndjson') return `read_json(${glob}, format = 'newline_delimited')`;
  return `read_csv(${glob}, header = true)`;
}

const duckFigures = async (dir: string, format: ExportFormat): Promise<Figures[]> =>
  normalise(
    await duckRows(`SELECT selected_model AS model, status, coalesce(experiment_arm, '-') AS arm, count(*) AS n, sum(cost_usd) AS cost,
                           sum(latency_ms) AS latency, sum(prompt_tokens) AS tokens
                    FROM ${reader(dir, format)} GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`),
  );

interface Env {
  name: string;
  available: boolean;
  setUp(): Promise<{ store: SqlStore; source: ExportSource; url?: string; tearDown(): Promise<void> }>;
}

const ENVS: Env[] = [
  {
    name: 'PGlite',
    available: true,
    setUp: async () => {
      const store = await createTestPglite();
      return { store, source: new KeysetExportSource(store), tearDown: () => store.close() };
    },
  },
  {
    name: 'Postgres',
    available: Boolean(TEST_DATABASE_URL),
    setUp: async () => {
      const db: TestDatabase = await createTestDatabase();
      const store = new PgSqlStore(db.url);
      // The first step (every stored row) is read the way a large one is, without a sort; the later,
      // small ones with the default plan.
      const source = new PgExportSource(db.url, { fastStartRows: 1_000 });
      return {
        store,
        source,
        url: db.url,
        tearDown: async () => {
          await source.close();
          await store.close();
          await db.drop();
        },
      };
    },
  },
];

for (const env of ENVS) {
  (env.available ? describe : describe.skip)(`gateway export (${env.name})`, () => {
    let h: Awaited<ReturnType<Env['setUp']>>;
    const tmp = mkdtempSync(join(tmpdir(), 'gw-export-'));
    const now = new Date();

    const run = (out: string, kinds: ExportKind[], format: ExportFormat, mode: ExportMode = 'catch-up') =>
      new Exporter(h.source, { mode, batchRows: 700, log: quiet }).run(
        kinds.map((kind) => ({
          schema: SCHEMAS[kind],
          destination: new DirectoryDestination({
            dir: join(out, kind),
            schema: SCHEMAS[kind],
            format,
            rotateBytes: 16 * 1024,
            rotateMs: 3_600_000,
            cursor: mode !== 'once',
            encoder: { rowGroupRows: 500 },
          }),
        })),
      );

    beforeAll(async () => {
      h = await env.setUp();
      // Three transactions of traces, then experiment events and key audit rows.
      for (const [from, to] of [[0, 1500], [1500, 2500], [2500, 3000]]) await h.store.query(INSERT_TRACES, [from, to, now.toISOString()]);
      await h.store.query(`INSERT INTO organizations (id, name, plan) VALUES ('org-0', 'org-0', 'pro'), ('org-1', 'org-1', 'pro')`, []);
      const { rows } = await h.store.query<{ id: string }>(
        `INSERT INTO experiments (org_id, type, status, traffic_pct, baseline_provider, baseline_model, candidate_provider, candidate_model, min_n, max_regression)
         VALUES ('org-0', 'canary', 'active', 10, 'mock', 'm1', 'mock', 'm2', 100, 0.05) RETURNING id::text AS id`,
        [],
      );
      for (const kind of ['created', 'started', 'rolled_back']) {
        await h.store.query(`INSERT INTO experiment_events (experiment_id, org_id, kind, actor_api_key_id, detail) VALUES ($1, 'org-0', $2, 'key-0', '{"by":"test"}')`, [rows[0].id, kind]);
      }
      for (let i = 0; i < 4; i++) {
        await h.store.query(`INSERT INTO key_audit (org_id, key_id, action, actor, detail) VALUES ('org-1', $1, 'created', 'cli', '{"permissions":["read"]}')`, [`k-${i}`]);
      }
    });
    afterAll(async () => {
      await h?.tearDown();
      rmSync(tmp, { recursive: true, force: true });
    });

    it.each(['parquet', 'ndjson', 'csv'] as const)('%s: DuckDB reads back the store: counts and sums per model, status and arm', async (format) => {
      const out = join(tmp, `all-${format}`);
      const summary = await run(out, ['traces', 'events', 'key_audit'], format);
      const expected = normalise((await h.store.query<Record<string, unknown>>(STORE_FIGURES, [])).rows);
      expect(expected.reduce((n, f) => n + f.n, 0)).toBe(3000);
      expect(new Set(expected.map((f) => f.model))).toEqual(new Set(MODELS));
      expect(await duckFigures(join(out, 'traces'), format)).toEqual(expected);
      expect(summary.kinds.map((k) => [k.kind, k.rows])).toEqual([['traces', 3000], ['events', 3], ['key_audit', 4]]);
      // Rotated at 16 KiB: several files, each row in exactly one.
      const files = readdirSync(join(out, 'traces')).filter((f) => f.startsWith('part-'));
      expect(files.length).toBeGreaterThan(1);
      expect(Number((await duckRows(`SELECT count(DISTINCT id) AS n FROM ${reader(join(out, 'traces'), format)}`))[0].n)).toBe(3000);
      // No temporary file left; the files chain (each one's <from> is the previous one's <to>) from
      // the beginning; the cursor is where the run stopped.
      expect(readdirSync(join(out, 'traces')).filter((f) => f.endsWith('.tmp'))).toEqual([]);
      const next = new Map(files.map((f) => [f.split('-')[1], f.split('-')[2].replace(/\.[a-z]+$/, '')]));
      let at = '0';
      for (let i = 0; i < files.length; i++) at = next.get(at) ?? 'broken chain';
      expect(at).toMatch(/^\d/);
      const cursor = JSON.parse(readFileSync(join(out, 'traces', '.cursor'), 'utf8'));
      expect(cursor).toEqual({ kind: 'traces', schema_version: 1, position: summary.kinds[0].position });

      const events = await duckRows(`SELECT kind, org_id, actor_key_id, schema_version FROM ${reader(join(out, 'events'), format)} ORDER BY id`);
      expect(events.map((e) => [e.kind, e.org_id, e.actor_key_id, Number(e.schema_version)])).toEqual([
        ['created', 'org-0', 'key-0', 1],
        ['started', 'org-0', 'key-0', 1],
        ['rolled_back', 'org-0', 'key-0', 1],
      ]);
      const audit = await duckRows(`SELECT key_id, action, actor FROM ${reader(join(out, 'key_audit'), format)} ORDER BY id`);
      expect(audit.map((a) => a.key_id)).toEqual(['k-0', 'k-1', 'k-2', 'k-3']);
    });

    it('Parquet columns are typed (int64 ids, µs UTC timestamps, JSON) and the schema version is in the file', async () => {
      const out = join(tmp, 'typed');
      await run(out, ['traces'], 'parquet', 'once');
      const described = await duckRows(`SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM ${reader(join(out, 'traces'), 'parquet')})`);
      const types = Object.fromEntries(described.map((r) => [r.column_name, r.column_type]));
      expect(types).toMatchObject({ schema_version: 'INTEGER', id: 'BIGINT', created_at: 'TIMESTAMP WITH TIME ZONE', status: 'INTEGER', cost_usd: 'DOUBLE', fallback_used: 'BOOLEAN', candidates: 'JSON', org_id: 'VARCHAR' });
      const meta = await duckRows(`SELECT decode(key) AS k, decode(value) AS v FROM parquet_kv_metadata('${join(out, 'traces', 'part-*.parquet')}')`);
      expect(meta).toEqual(expect.arrayContaining([{ k: 'gateway.export.kind', v: 'traces' }, { k: 'gateway.export.schema_version', v: '1' }]));
      // created_at keeps its microseconds, the candidates their JSON.
      const [{ us }] = await h.store.query<{ us: string }>(`SELECT (extract(epoch FROM created_at) * 1000000)::bigint::text AS us FROM decision_traces WHERE id = 1000000007`, []).then((r) => r.rows);
      const [row] = await duckRows(`SELECT epoch_us(created_at)::VARCHAR AS us, candidates->>'$[0].model' AS m, failed_attempts->>'$[0].status' AS s FROM ${reader(join(out, 'traces'), 'parquet')} WHERE id = 1000000007`);
      expect(row).toEqual({ us, m: 'm3', s: '502' });
    });

    it('a second pass exports only what is new, traces inserted late with a created_at days old included, each once', async () => {
      const out = join(tmp, 'incremental');
      expect((await run(out, ['traces'], 'ndjson')).kinds[0].rows).toBe(3000);
      // A replica's spool replayed after an outage: rows three days old, committed now.
      const old = new Date(now.getTime() - 3 * 86_400_000).toISOString();
      await h.store.query(INSERT_TRACES, [5000, 5050, old]);
      const second = await run(out, ['traces'], 'ndjson');
      expect(second.kinds[0].rows).toBe(50);
      expect((await run(out, ['traces'], 'ndjson')).kinds[0].rows).toBe(0);
      const ids = await duckRows(`SELECT id, count(*) AS n FROM ${reader(join(out, 'traces'), 'ndjson')} GROUP BY id HAVING count(*) > 1`);
      expect(ids).toEqual([]);
      expect(Number((await duckRows(`SELECT count(*) AS n FROM ${reader(join(out, 'traces'), 'ndjson')} WHERE id >= 1000005000`))[0].n)).toBe(50);
      await h.store.query(`DELETE FROM decision_traces WHERE id >= 1000005000`, []);
    });

    it('rows sharing a created_at are ordered by id as numbers, across batch boundaries, each once', async () => {
      // Ids of one and two digits at one instant: as text, 10 would sort before 9.
      await h.store.query(
        `INSERT INTO decision_traces (created_at, id, latency_ms, status, request_id, org_id, api_key_id, endpoint, requested_model)
         SELECT $1::timestamptz, g, 1, 200, 'same-' || g, 'org-9', 'k', 'chat', 'auto' FROM generate_series(1, 30) g`,
        [new Date(now.getTime() - 86_400_000).toISOString()],
      );
      const out = join(tmp, 'same-instant');
      const jobs = [{ schema: SCHEMAS.traces, destination: new DirectoryDestination({ dir: join(out, 'traces'), schema: SCHEMAS.traces, format: 'ndjson', rotateBytes: 4096, rotateMs: 3_600_000, cursor: true }) }];
      await new Exporter(h.source, { mode: 'catch-up', orgId: 'org-9', batchRows: 4, log: quiet }).run(jobs);
      const rows = await duckRows(`SELECT id FROM ${reader(join(out, 'traces'), 'ndjson')} ORDER BY filename, id`);
      expect(rows.map((r) => Number(r.id)).sort((a, b) => a - b)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
      await h.store.query(`DELETE FROM decision_traces WHERE org_id = 'org-9'`, []);
    });

    it('standard output with a cursor file starts where the previous run stopped', async () => {
      const cursorFile = join(tmp, 'stdout.cursor');
      const once = async () => {
        const stream = new PassThrough();
        let text = '';
        stream.on('data', (c: Buffer) => (text += c.toString('utf8')));
        const destination = new StreamDestination({ stream, schema: SCHEMAS.events, format: 'ndjson', cursorFile });
        await new Exporter(h.source, { mode: 'catch-up', log: quiet }).run([{ schema: SCHEMAS.events, destination }]);
        return text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
      };
      const first = await once();
      expect(first.map((e) => e.kind)).toEqual(['created', 'started', 'rolled_back']);
      expect(first[0]).toEqual({ schema_version: 1, id: expect.any(Number), created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/), org_id: 'org-0', experiment_id: expect.any(String), kind: 'created', actor_key_id: 'key-0', detail: { by: 'test' } });
      expect(await once()).toEqual([]);
      const { rows } = await h.store.query<{ id: string }>(`SELECT experiment_id::text AS id FROM experiment_events LIMIT 1`, []);
      await h.store.query(`INSERT INTO experiment_events (experiment_id, org_id, kind) VALUES ($1, 'org-0', 'completed')`, [rows[0].id]);
      expect((await once()).map((e) => e.kind)).toEqual(['completed']);
    });

    if (env.name === 'Postgres') {
      it('a trace committed after a later one is neither skipped nor exported twice', async () => {
        const out = join(tmp, 'out-of-order');
        await run(out, ['traces'], 'ndjson');
        const early = new Client({ connectionString: h.url });
        await early.connect();
        try {
          // The early transaction takes its txid first and stays open while a later one commits.
          await early.query('BEGIN');
          await early.query(INSERT_TRACES, [6000, 6001, now.toISOString()]);
          await h.store.query(INSERT_TRACES, [6001, 6002, now.toISOString()]);
          // Held back: the open transaction bounds the snapshot, so the later row waits for it.
          expect((await run(out, ['traces'], 'ndjson')).kinds[0].rows).toBe(0);
          await early.query('COMMIT');
        } finally {
          await early.end();
        }
        expect((await run(out, ['traces'], 'ndjson')).kinds[0].rows).toBe(2);
        const late = await duckRows(`SELECT id, count(*) AS n FROM ${reader(join(out, 'traces'), 'ndjson')} WHERE id >= 1000006000 GROUP BY id ORDER BY id`);
        expect(late.map((r) => [Number(r.id), Number(r.n)])).toEqual([[1000006000, 1], [1000006001, 1]]);
        await h.store.query(`DELETE FROM decision_traces WHERE id >= 1000006000`, []);
      });
    }
  });
}
