/**
 * Migration 0005 (decision traces by UTC day) on both analytics-store adapters: an existing
 * deployment's traces become one partition without a row lost or changed, the readers give the same
 * answers as before, new traces keep going in, and writing a batch twice stores it once.
 */
import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ExperimentStatsRepository } from '../../src/experiments/experiment-stats.repository';
import { ModelStatsRepository } from '../../src/learning/model-stats.repository';
import { RegressionsRepository } from '../../src/routing/regressions/regressions.repository';
import { ANALYTICS_MIGRATIONS, readMigrations, runMigrations, type MigrationSet } from '../../src/stores/sql/migrator';
import type { SqlStore } from '../../src/stores/sql/sql-store';
import type { DecisionTrace } from '../../src/traces/decision-trace';
import { DecisionTracesRepository } from '../../src/traces/decision-traces.repository';
import { newTraceId } from '../../src/traces/trace-id';

export interface PartitioningHandle {
  /** An empty database (no migration applied). */
  store: SqlStore;
  cleanup(): Promise<void>;
}

export type MakeEmptyStore = () => Promise<PartitioningHandle>;

const DAY_MS = 86_400_000;
const EXPERIMENT = '6f1c0a52-4c39-4c2f-9a52-8b1f6f3b2a10';

/** The analytics migrations up to `version` only: a deployment as it was before 0005. */
export function migrationsUpTo(version: number): { set: MigrationSet; cleanup(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'gw-migrations-'));
  for (const f of readdirSync(ANALYTICS_MIGRATIONS.dir)) {
    const m = /^(\d{4})_.*\.sql$/.exec(f);
    if (m && Number(m[1]) <= version) cpSync(join(ANALYTICS_MIGRATIONS.dir, f), join(dir, f));
  }
  return { set: { dir, table: ANALYTICS_MIGRATIONS.table }, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * `n` traces (on the pre-0005 table: with identity ids), spread over the last 40 days (never within an hour
 * of a day's edge of the learning window, so a recompute minutes later sees the same ones), a tenth
 * of them in an experiment, most with a session; and feedback for some sessions.
 */
export async function populateOldTable(store: SqlStore, n: number): Promise<void> {
  await store.query(`INSERT INTO organizations (id, name, plan) VALUES ('acme', 'Acme', 'pro') ON CONFLICT DO NOTHING`, []);
  await store.query(
    `INSERT INTO experiments (id, org_id, type, status, traffic_pct, baseline_provider, baseline_model, candidate_provider, candidate_model,
       min_n, max_regression, started_at, created_at)
     VALUES ($1, 'acme', 'canary', 'active', 10, 'p0', 'm0', 'p1', 'm1', 100000, 0.05, now() - interval '45 days', now() - interval '45 days')`,
    [EXPERIMENT],
  );
  await store.query(
    `INSERT INTO decision_traces (request_id, org_id, api_key_id, session_id, endpoint, requested_model, route, strategy, candidates,
       selected_provider, selected_model, fallback_used, attempts, experiment_id, experiment_arm, status, error_code, latency_ms, ttft_ms,
       prompt_tokens, completion_tokens, reasoning_tokens, cost_usd, finish_reason, created_at, failed_attempts)
     SELECT 'req-' || g, CASE WHEN g % 7 = 0 THEN 'beta' ELSE 'acme' END, 'key-' || (g % 3), CASE WHEN g % 5 = 0 THEN NULL ELSE 's-' || (g % 997) END,
            CASE WHEN g % 11 = 0 THEN 'embeddings' ELSE 'chat' END, 'auto', 'default', 'feedback_driven',
            jsonb_build_array(jsonb_build_object('provider', 'p' || (g % 3), 'model', 'm' || (g % 3), 'score', (g % 10) / 10.0)),
            'p' || (g % 3), 'm' || (g % 3), g % 13 = 0, 1 + (g % 13 = 0)::int,
            CASE WHEN g % 10 = 0 THEN $2::uuid END, CASE WHEN g % 10 = 0 THEN (CASE WHEN g % 20 = 0 THEN 'baseline' ELSE 'candidate' END) END,
            CASE WHEN g % 17 = 0 THEN 502 ELSE 200 END, CASE WHEN g % 17 = 0 THEN 'upstream_error' END,
            (g % 1000) + 0.25, CASE WHEN g % 2 = 0 THEN (g % 100) + 0.5 END, g % 500, g % 300, NULL, (g % 100) / 100000.0, 'stop',
            now() - (g % 40) * interval '1 day' - interval '1 hour' - (g % 3000) * interval '1 second',
            CASE WHEN g % 13 = 0 THEN jsonb_build_array(jsonb_build_object('provider', 'p9', 'model', 'm9', 'error', 'status', 'status', 503)) END
       FROM generate_series(1, $1::int) AS g`,
    [n, EXPERIMENT],
  );
  await store.query(
    `INSERT INTO feedback (org_id, session_id, score, useful, created_at, updated_at)
     SELECT 'acme', 's-' || g, g % 11, g % 3 = 0, now() - (g % 35) * interval '1 day' - interval '2 hours', now() - (g % 35) * interval '1 day' - interval '2 hours'
       FROM generate_series(1, 996, 2) AS g`,
    [],
  );
}

/** Everything about the stored traces, in one comparable row: counts, sums and a digest of every column's value. */
export async function fingerprint(store: SqlStore): Promise<Record<string, unknown>> {
  const { rows } = await store.query(
    `SELECT count(*)::int AS n, sum(id)::text AS ids, sum(latency_ms)::text AS latency, sum(cost_usd)::text AS cost,
            count(DISTINCT request_id)::int AS requests, count(experiment_id)::int AS in_experiment,
            md5(string_agg(concat_ws('|', id, request_id, org_id, api_key_id, session_id, endpoint, requested_model, route, strategy,
                candidates::text, selected_provider, selected_model, fallback_used, attempts, experiment_id, experiment_arm, status,
                error_code, latency_ms, ttft_ms, prompt_tokens, completion_tokens, reasoning_tokens, cost_usd, finish_reason,
                extract(epoch FROM created_at), failed_attempts::text), ',' ORDER BY id)) AS digest
       FROM decision_traces`,
    [],
  );
  return rows[0];
}

/**
 * What the readers of traces make of them: the learning aggregates from the raw traces (the full
 * recompute) and through the learning rollups, and one experiment's arms (through its rollups). The
 * rollups take existing rows in by a backfill that may span several calls.
 */
async function readers(store: SqlStore): Promise<{ fromTraces: unknown[]; stats: unknown[]; arms: unknown }> {
  const repo = new ModelStatsRepository(store);
  const params = { windowSeconds: 30 * 86_400, weights: { score: 0.6, useful: 0.4 } };
  const sorted = async () =>
    (await repo.loadAll())
      .map(({ orgId, provider, model, n, requests, outcomeMean, successRate, costMeanUsd, npsPromoters }) => ({ orgId, provider, model, n, requests, outcomeMean, successRate, costMeanUsd, npsPromoters }))
      .sort((a, b) => `${a.orgId}/${a.provider}/${a.model}`.localeCompare(`${b.orgId}/${b.provider}/${b.model}`));
  expect(await repo.recomputeFromTraces(params)).toBe('done');
  const fromTraces = await sorted();
  await store.query('DELETE FROM model_stats', []);
  let stats: unknown[] = [];
  for (let beat = 0; beat < 20 && stats.length === 0; beat++) {
    expect(await repo.recompute({ ...params, backfill: { budgetMs: 60_000, chunkRows: 1_000_000 } })).toBe('done');
    stats = await sorted();
  }
  const experiments = new ExperimentStatsRepository(store);
  const experiment = { id: EXPERIMENT, orgId: 'acme', startedAt: new Date(Date.now() - 45 * DAY_MS), createdAt: new Date() };
  let arms = await experiments.armStats(experiment);
  for (let beat = 0; beat < 20 && arms.baseline.requests === 0; beat++) arms = await experiments.armStats(experiment);
  return roundedFloats({ fromTraces, stats, arms });
}

/** Float sums depend on the order rows are read in (another table layout, another order): compared to 12 significant digits. */
function roundedFloats<T>(v: T): T {
  if (typeof v === 'number') return (Number.isInteger(v) ? v : Number(v.toPrecision(12))) as T;
  if (Array.isArray(v)) return v.map(roundedFloats) as T;
  if (v && typeof v === 'object' && !(v instanceof Date)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, roundedFloats(x)])) as T;
  return v;
}

export function trace(over: Partial<DecisionTrace> = {}): DecisionTrace {
  const createdAt = over.createdAt ?? new Date();
  return {
    id: newTraceId(createdAt.getTime()),
    requestId: `new-${Math.random().toString(36).slice(2)}`,
    orgId: 'acme',
    apiKeyId: 'key-1',
    sessionId: 's-1',
    endpoint: 'chat',
    requestedModel: 'auto',
    route: 'default',
    strategy: 'ordered',
    candidates: null,
    selectedProvider: 'p1',
    selectedModel: 'm1',
    fallbackUsed: false,
    attempts: 1,
    failedAttempts: null,
    experimentId: null,
    experimentArm: null,
    status: 200,
    errorCode: null,
    latencyMs: 10,
    ttftMs: null,
    promptTokens: 1,
    completionTokens: 2,
    reasoningTokens: null,
    costUsd: 0.001,
    finishReason: 'stop',
    createdAt,
    ...over,
  };
}

/** Each partition of decision_traces with its bound expression and row count. */
export async function partitions(store: SqlStore): Promise<Array<{ name: string; rows: number }>> {
  const { rows } = await store.query<{ name: string; rows: number }>(
    `SELECT c.relname AS name, (xpath('/row/n/text()', query_to_xml(format('SELECT count(*) AS n FROM %I', c.relname), false, true, '')))[1]::text::int AS rows
       FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = 'decision_traces'::regclass ORDER BY c.relname`,
    [],
  );
  return rows;
}

const isoDay = (ms: number): string => new Date(ms).toISOString().slice(0, 10);
export const utcDay = (ms: number): string => isoDay(ms).replace(/-/g, '');

/** A partition's bounds as Postgres prints them in UTC. */
export async function bounds(store: SqlStore, partition: string): Promise<string> {
  return store.transaction(async (tx) => {
    await tx.query(`SET LOCAL TimeZone = 'UTC'`, []);
    await tx.query(`SET LOCAL DateStyle = 'ISO, YMD'`, []);
    const { rows } = await tx.query<{ b: string }>(`SELECT pg_get_expr(relpartbound, oid) AS b FROM pg_class WHERE relname = $1`, [partition]);
    return rows[0]?.b;
  });
}

/**
 * The last millisecond before `dayMs`'s UTC midnight and the midnight itself land in the two days'
 * partitions, written from a session whose time zone is 14 hours ahead of UTC.
 */
export async function expectUtcMidnightSplit(store: SqlStore, dayMs: number): Promise<void> {
  const midnight = Math.floor(dayMs / DAY_MS) * DAY_MS;
  const placed = await store.transaction(async (tx) => {
    await tx.query(`SET LOCAL TimeZone = 'Pacific/Kiritimati'`, []);
    for (const [id, at] of [['before-midnight', midnight - 1], ['at-midnight', midnight]] as const) {
      await tx.query(
        `INSERT INTO decision_traces (id, request_id, org_id, api_key_id, endpoint, requested_model, status, latency_ms, created_at)
         VALUES ($1, $2, 'acme', 'k', 'chat', 'auto', 200, 1, $3::timestamptz)`,
        [newTraceId(at), id, new Date(at).toISOString()],
      );
    }
    return (await tx.query<{ request_id: string; part: string }>(
      `SELECT request_id, tableoid::regclass::text AS part FROM decision_traces WHERE request_id IN ('before-midnight', 'at-midnight') ORDER BY created_at`, [])).rows;
  });
  expect(placed).toEqual([
    { request_id: 'before-midnight', part: `decision_traces_p${utcDay(midnight - 1)}` },
    { request_id: 'at-midnight', part: `decision_traces_p${utcDay(midnight)}` },
  ]);
}

export function decisionTracesByDayContract(name: string, makeStore: MakeEmptyStore, rowsBefore: number): void {
  describe(`migration 0005 (decision traces by UTC day): ${name}`, () => {
    it(`moves an existing deployment's ${rowsBefore} traces into the partitioned table: same rows, same readers' answers`, async () => {
      const h = await makeStore();
      const control = await makeStore();
      const old = migrationsUpTo(4);
      try {
        await runMigrations(h.store, old.set);
        await populateOldTable(h.store, rowsBefore);
        const before = await fingerprint(h.store);
        expect(before).toMatchObject({ n: rowsBefore, requests: rowsBefore });

        const applied = await runMigrations(h.store, ANALYTICS_MIGRATIONS);
        expect(applied.map((m) => m.version)).toEqual(readMigrations(ANALYTICS_MIGRATIONS.dir).map((m) => m.version).filter((v) => v > 4));
        expect(await fingerprint(h.store)).toEqual(before);

        // The readers (today's code, which expects today's schema) answer on the migrated database as
        // on a new installation holding the same traces and feedback.
        await runMigrations(control.store, ANALYTICS_MIGRATIONS);
        await populateOldTable(control.store, rowsBefore);
        const expected = await readers(control.store);
        expect(expected.fromTraces.length).toBeGreaterThan(0);
        expect(expected.stats.length).toBeGreaterThan(0);
        expect((expected.arms as { baseline: { requests: number } }).baseline.requests).toBeGreaterThan(0);
        expect(await readers(h.store)).toEqual(expected);
        const regressions = await new RegressionsRepository(h.store).detectQualityDrops({
          longRunSeconds: 30 * 86_400, rollingSeconds: 86_400, weights: { score: 0.6, useful: 0.4 }, minSamples: 20, margin: 0.1,
        });
        expect(Array.isArray(regressions)).toBe(true);

        // The old table is the partition of everything before its bound day, at least two days ahead;
        // day partitions from there to a week ahead, and the default one.
        const parts = await partitions(h.store);
        const legacy = parts.filter((p) => /^decision_traces_before_\d{8}$/.test(p.name));
        expect(legacy).toEqual([{ name: expect.any(String), rows: rowsBefore }]);
        const bound = legacy[0].name.slice(-8);
        expect(bound >= utcDay(Date.now() + 2 * DAY_MS)).toBe(true);
        const days = parts.filter((p) => /^decision_traces_p\d{8}$/.test(p.name)).map((p) => p.name.slice(-8));
        expect(days[0]).toBe(bound);
        expect(days[days.length - 1]).toBe(utcDay(Date.now() + 7 * DAY_MS));
        expect(parts.find((p) => p.name === 'decision_traces_default')).toEqual({ name: 'decision_traces_default', rows: 0 });
        // Time scans go through the key; the old created_at index is gone. (Sessions are looked up
        // through the request and session bloom index of 0012, which replaced the session btree.)
        const { rows: indexes } = await h.store.query<{ indexname: string; indexdef: string }>(
          `SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'decision_traces' ORDER BY indexname`, []);
        expect(indexes.map((i) => i.indexname)).toEqual(expect.arrayContaining(['decision_traces_experiment_idx', 'decision_traces_request_session_idx', 'decision_traces_pkey']));
        expect(indexes.map((i) => i.indexname)).not.toContain('decision_traces_created_idx');
        expect(indexes.find((i) => i.indexname === 'decision_traces_pkey')?.indexdef).toContain('(created_at, id)');

        // New traces keep going in (today's go to the old table's partition until its bound), and a
        // batch written twice is stored once.
        const repo = new DecisionTracesRepository(h.store);
        const batch = [trace(), trace(), trace({ createdAt: new Date(Date.now() - 3 * DAY_MS) })];
        await repo.write(batch);
        await repo.write(batch);
        await repo.write([batch[1], trace({ requestId: 'last' })]);
        expect((await fingerprint(h.store)).n).toBe(rowsBefore + 4);
        const { rows: where } = await h.store.query<{ part: string }>(
          `SELECT tableoid::regclass::text AS part FROM decision_traces WHERE request_id = $1`, [batch[0].requestId]);
        expect(where).toEqual([{ part: legacy[0].name }]);
        // A row written without an id (a replica on the previous version) gets one from the default.
        await h.store.query(`INSERT INTO decision_traces (request_id, org_id, api_key_id, endpoint, requested_model, status, latency_ms)
                             VALUES ('old-replica', 'acme', 'k', 'chat', 'auto', 200, 1)`, []);
        const { rows: ids } = await h.store.query<{ id: number }>(`SELECT id FROM decision_traces WHERE request_id = 'old-replica'`, []);
        expect(Number.isSafeInteger(ids[0].id) && ids[0].id > 2 ** 37).toBe(true);
      } finally {
        old.cleanup();
        await h.cleanup();
        await control.cleanup();
      }
    });

    it('on a new installation: no partition of old traces; day partitions from today (UTC) to a week ahead, and the default', async () => {
      const h = await makeStore();
      try {
        await runMigrations(h.store, ANALYTICS_MIGRATIONS);
        const today = Date.now();
        const expected = Array.from({ length: 8 }, (_, i) => `decision_traces_p${utcDay(today + i * DAY_MS)}`);
        // A run across midnight may also have created yesterday's.
        const names = (await partitions(h.store)).map((p) => p.name).filter((n) => n !== `decision_traces_p${utcDay(today - DAY_MS)}`);
        expect(names).toEqual(['decision_traces_default', ...expected]);
        expect(await bounds(h.store, expected[1])).toBe(
          `FOR VALUES FROM ('${isoDay(today + DAY_MS)} 00:00:00+00') TO ('${isoDay(today + 2 * DAY_MS)} 00:00:00+00')`,
        );
        await expectUtcMidnightSplit(h.store, today + DAY_MS);
      } finally {
        await h.cleanup();
      }
    });
  });
}
