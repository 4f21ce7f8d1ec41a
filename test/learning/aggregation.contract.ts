/**
 * The aggregation job's figures against a seeded set of traces and feedback, with every expected
 * figure computed by hand below. One suite, run on PGlite and on a real Postgres (the same SQL
 * runs on both adapters), for both ways of computing them: the beat (rollups taken in since the
 * last beat, then model_stats rewritten from them) and the full recompute from the raw traces that
 * is its oracle. The hand-picked latencies each sit alone in their histogram bin, so the beat's
 * percentiles are exact here too.
 */
import type { ModelStats } from '../../src/learning/model-stats';
import type { FailedAttempt } from '../../src/routing/dispatcher.service';
import { AggregationParams, AggregationResult, ModelStatsRepository } from '../../src/learning/model-stats.repository';
import { StatsSnapshotService } from '../../src/learning/stats-snapshot.service';
import type { SqlExecutor, SqlStore } from '../../src/stores/sql/sql-store';

export interface AggregationStoreHandle {
  store: SqlStore;
  /** A second client of the same database, as another replica has (PGlite: the same store). */
  peer(): Promise<SqlStore>;
  cleanup(): Promise<void>;
}

const PARAMS = { windowSeconds: 30 * 86_400, weights: { score: 0.6, useful: 0.4 } };
const DAY_HOURS = 24;
const HOUR_MS = 3_600_000;

/** Every table the figures are derived into: emptied before each test with the sources. */
export const DERIVED_TABLES = 'model_stats, rollup_state, rollup_model_hours, rollup_sample_hours, rollup_session_pairs, rollup_window, rollup_window_latency, rollup_epoch_window, rollup_epoch_window_latency, drift_queue';

interface Engine {
  name: string;
  run(repo: ModelStatsRepository, p: AggregationParams): Promise<AggregationResult>;
  /** Lets every trace of the model `m-c` (3 hours old, the others 1 hour or less) leave the 30-day window, and runs. */
  expireMc(sql: SqlExecutor, repo: ModelStatsRepository): Promise<void>;
}

const ENGINES: Engine[] = [
  {
    name: 'the beat (rollups)',
    run: (repo, p) => repo.recompute(p),
    // Traces are written once: time passes instead. With the window ending 30 days − 2 hours from
    // now, it starts between 2 and 1 hours ago (a whole hour): m-c's trace is out, the rest in.
    expireMc: async (_sql, repo) => void (await repo.recompute({ ...PARAMS, at: new Date(Date.now() + 30 * DAY_HOURS * HOUR_MS - 2 * HOUR_MS) })),
  },
  {
    name: 'the full recompute (oracle)',
    run: (repo, p) => repo.recomputeFromTraces(p),
    expireMc: async (sql, repo) => {
      await sql.query(`UPDATE decision_traces SET created_at = now() - interval '31 days' WHERE selected_model = 'm-c'`, []);
      await repo.recomputeFromTraces(PARAMS);
    },
  },
];

let seq = 0;
interface TraceSeed {
  org: string;
  session: string | null;
  /** null: no target served (every one tried failed). */
  provider: string | null;
  model: string | null;
  status?: number;
  latency: number;
  cost?: number | null;
  endpoint?: 'chat' | 'embeddings';
  ageHours?: number;
  failed?: FailedAttempt[];
}

async function trace(sql: SqlExecutor, t: TraceSeed): Promise<void> {
  await sql.query(
    `INSERT INTO decision_traces (request_id, org_id, api_key_id, session_id, endpoint, requested_model, selected_provider,
       selected_model, status, latency_ms, cost_usd, created_at, failed_attempts)
     VALUES ($1, $2, 'k', $3, $4, COALESCE($5, 'auto'), $6, $5, $7, $8, $9, now() - $10::float8 * interval '1 hour', $11::jsonb)`,
    [
      `req-${seq++}`, t.org, t.session, t.endpoint ?? 'chat', t.model, t.provider, t.status ?? 200, t.latency, t.cost ?? null, t.ageHours ?? 1,
      t.failed ? JSON.stringify(t.failed) : null,
    ],
  );
}

async function feedback(sql: SqlExecutor, org: string, session: string, score: number, useful: boolean, ageHours = 0): Promise<void> {
  await sql.query(
    `INSERT INTO feedback (org_id, session_id, score, useful, created_at, updated_at)
     VALUES ($1, $2, $3, $4, now() - $5::float8 * interval '1 hour', now() - $5::float8 * interval '1 hour')
     ON CONFLICT (org_id, session_id) DO UPDATE SET score = EXCLUDED.score, useful = EXCLUDED.useful, updated_at = EXCLUDED.updated_at`,
    [org, session, score, useful, ageHours],
  );
}

/*
 * The seeded world (window 30 days, weights 0.6 / 0.4, y = 0.6·score/10 + 0.4·useful):
 *
 * acme, traces (chat unless said; ok = status 200)
 *   s1   p1/m-a ok 100 ms $0.001 · p1/m-a ok 200 ms $0.003 · p1/emb embeddings ok 20 ms $0.0001
 *   s2   p1/m-a ok 300 ms $0.002 · p2/m-b ok 400 ms $0.010                (served by two models)
 *   s3   p2/m-b 502 500 ms                                                (failed: attributes nothing)
 *   s4   p2/m-b ok 600 ms $0.020
 *   s5   p1/m-a 502 900 ms                                                (no feedback)
 *   s6   p2/m-b ok 800 ms $0.030                                          (feedback 40 days old)
 *   sold p1/m-a ok 5000 ms, 40 days old                                   (outside the window)
 *   —    p1/m-c ok 50 ms, no session, no cost, 3 hours old
 * acme, feedback
 *   s1 9 useful → y = 0.54 + 0.4 = 0.94      s2 7 not useful → y = 0.42     s3 2 not useful (unattributed)
 *   s4 10 useful → y = 1.00                  s6 0, given 40 days ago (out)  sold 5 useful (its trace is out)
 * beta, traces: t1 p1/m-a ok 1000 ms $0.005;  feedback: t1 3 not useful → y = 0.18,
 *   and s1 0 not useful: beta has no trace of an s1, so acme's s1 traces must not pick it up.
 *
 * acme p1/m-a: samples s1 0.94, s2 0.42 → n 2, outcome mean 0.68, var ((0.26)² + (0.26)²)/2 = 0.0676;
 *   score 0.9, 0.7 → mean 0.8, var 0.01; useful 1, 0 → rate 0.5, var 0.25; NPS 0 / 1 / 1 (s2 passive, s1 promoter).
 *   requests s1×2, s2, s5 = 4 (sold is out), ok 3 → success 0.75; ok latencies 100, 200, 300:
 *   p50 200, p90 at rank 0.9·2 = 1.8 → 200 + 0.8·100 = 280, p99 at 1.98 → 298; cost (0.001 + 0.003 + 0.002)/3 = 0.002.
 * acme p2/m-b: samples s2 0.42, s4 1.00 (s3 failed, s6's feedback is old) → n 2, mean 0.71, var (0.29)² = 0.0841;
 *   score 0.7, 1.0 → mean 0.85, var 0.0225; useful 0, 1 → 0.5, 0.25; NPS 0 / 1 / 1.
 *   requests s2, s3, s4, s6 = 4, ok 3 → 0.75; ok latencies 400, 600, 800: p50 600, p90 at 1.8 → 760, p99 at 1.98 → 796;
 *   cost (0.010 + 0.020 + 0.030)/3 = 0.02.
 * acme p1/m-c: n 0, requests 1, success 1, p50 = p90 = p99 = 50, cost null (no cost recorded).
 * acme p1/emb: n 0 (embeddings attribute no feedback), requests 1, success 1, latency 20, cost 0.0001.
 * beta p1/m-a: n 1, mean 0.18, var 0; score 0.3, var 0; useful 0, var 0; NPS 1 / 0 / 0; requests 1, success 1,
 *   latencies 1000, cost 0.005.
 * pool '*' p1/m-a: samples 0.94, 0.42, 0.18 → n 3, mean 1.54/3 = 0.513333…; deviations 0.426667, −0.093333,
 *   −0.333333 → squares 0.182044, 0.008711, 0.111111 → var 0.301867/3 = 0.100622…;
 *   score 0.9, 0.7, 0.3 → mean 0.633333…, var (0.071111 + 0.004444 + 0.111111)/3 = 0.062222…;
 *   useful 1, 0, 0 → rate 1/3, var 2/9; NPS 1 / 1 / 1; requests 4 + 1 = 5, ok 4 → 0.8;
 *   ok latencies 100, 200, 300, 1000: p50 at 1.5 → 250, p90 at 2.7 → 300 + 0.7·700 = 790, p99 at 2.97 → 979;
 *   cost (0.001 + 0.003 + 0.002 + 0.005)/4 = 0.00275.
 * pool '*' p2/m-b, p1/m-c, p1/emb: as acme's (no other organisation used them).
 */
async function seed(sql: SqlExecutor): Promise<void> {
  await trace(sql, { org: 'acme', session: 's1', provider: 'p1', model: 'm-a', latency: 100, cost: 0.001 });
  await trace(sql, { org: 'acme', session: 's1', provider: 'p1', model: 'm-a', latency: 200, cost: 0.003 });
  await trace(sql, { org: 'acme', session: 's1', provider: 'p1', model: 'emb', latency: 20, cost: 0.0001, endpoint: 'embeddings' });
  await trace(sql, { org: 'acme', session: 's2', provider: 'p1', model: 'm-a', latency: 300, cost: 0.002 });
  await trace(sql, { org: 'acme', session: 's2', provider: 'p2', model: 'm-b', latency: 400, cost: 0.01 });
  await trace(sql, { org: 'acme', session: 's3', provider: 'p2', model: 'm-b', latency: 500, status: 502 });
  await trace(sql, { org: 'acme', session: 's4', provider: 'p2', model: 'm-b', latency: 600, cost: 0.02 });
  await trace(sql, { org: 'acme', session: 's5', provider: 'p1', model: 'm-a', latency: 900, status: 502 });
  await trace(sql, { org: 'acme', session: 's6', provider: 'p2', model: 'm-b', latency: 800, cost: 0.03 });
  await trace(sql, { org: 'acme', session: 'sold', provider: 'p1', model: 'm-a', latency: 5000, cost: 1, ageHours: 40 * DAY_HOURS });
  await trace(sql, { org: 'acme', session: null, provider: 'p1', model: 'm-c', latency: 50, ageHours: 3 });
  await trace(sql, { org: 'beta', session: 't1', provider: 'p1', model: 'm-a', latency: 1000, cost: 0.005 });
  await feedback(sql, 'acme', 's1', 9, true);
  await feedback(sql, 'acme', 's2', 7, false);
  await feedback(sql, 'acme', 's3', 2, false);
  await feedback(sql, 'acme', 's4', 10, true);
  await feedback(sql, 'acme', 's6', 0, false, 40 * DAY_HOURS);
  await feedback(sql, 'acme', 'sold', 5, true);
  await feedback(sql, 'beta', 't1', 3, false);
  await feedback(sql, 'beta', 's1', 0, false);
}

type Expected = Omit<ModelStats, 'computedAt'>;
const row = (r: Partial<Expected> & Pick<Expected, 'orgId' | 'provider' | 'model'>): Expected => ({
  n: 0,
  outcomeMean: 0,
  outcomeVar: 0,
  scoreMean: 0,
  scoreVar: 0,
  usefulRate: 0,
  usefulVar: 0,
  successRate: 1,
  requests: 1,
  latencyP50Ms: null,
  latencyP90Ms: null,
  latencyP99Ms: null,
  costMeanUsd: null,
  npsDetractors: 0,
  npsPassives: 0,
  npsPromoters: 0,
  ...r,
});

const acmeA = row({
  orgId: 'acme', provider: 'p1', model: 'm-a', n: 2, outcomeMean: 0.68, outcomeVar: 0.0676, scoreMean: 0.8, scoreVar: 0.01,
  usefulRate: 0.5, usefulVar: 0.25, successRate: 0.75, requests: 4, latencyP50Ms: 200, latencyP90Ms: 280, latencyP99Ms: 298,
  costMeanUsd: 0.002, npsPassives: 1, npsPromoters: 1,
});
const acmeB = row({
  orgId: 'acme', provider: 'p2', model: 'm-b', n: 2, outcomeMean: 0.71, outcomeVar: 0.0841, scoreMean: 0.85, scoreVar: 0.0225,
  usefulRate: 0.5, usefulVar: 0.25, successRate: 0.75, requests: 4, latencyP50Ms: 600, latencyP90Ms: 760, latencyP99Ms: 796,
  costMeanUsd: 0.02, npsPassives: 1, npsPromoters: 1,
});
const acmeC = row({ orgId: 'acme', provider: 'p1', model: 'm-c', latencyP50Ms: 50, latencyP90Ms: 50, latencyP99Ms: 50 });
const acmeEmb = row({ orgId: 'acme', provider: 'p1', model: 'emb', latencyP50Ms: 20, latencyP90Ms: 20, latencyP99Ms: 20, costMeanUsd: 0.0001 });
const betaA = row({
  orgId: 'beta', provider: 'p1', model: 'm-a', n: 1, outcomeMean: 0.18, scoreMean: 0.3, latencyP50Ms: 1000, latencyP90Ms: 1000,
  latencyP99Ms: 1000, costMeanUsd: 0.005, npsDetractors: 1,
});
const poolA = row({
  orgId: '*', provider: 'p1', model: 'm-a', n: 3, outcomeMean: 1.54 / 3, outcomeVar: 0.301866666666667 / 3, scoreMean: 1.9 / 3,
  scoreVar: 0.186666666666667 / 3, usefulRate: 1 / 3, usefulVar: 2 / 9, successRate: 0.8, requests: 5, latencyP50Ms: 250,
  latencyP90Ms: 790, latencyP99Ms: 979, costMeanUsd: 0.00275, npsDetractors: 1, npsPassives: 1, npsPromoters: 1,
});
const EXPECTED: Expected[] = [
  acmeA, acmeB, acmeC, acmeEmb, betaA, poolA,
  { ...acmeB, orgId: '*' }, { ...acmeC, orgId: '*' }, { ...acmeEmb, orgId: '*' },
];

const keyOf = (s: { orgId: string; provider: string; model: string }) => `${s.orgId}/${s.provider}/${s.model}`;
const sorted = (rows: ModelStats[]) => [...rows].sort((a, b) => keyOf(a).localeCompare(keyOf(b)));

const COUNTS = new Set<keyof Expected>(['n', 'requests', 'npsDetractors', 'npsPassives', 'npsPromoters']);

/** Every figure equal to 9 decimals; counts, keys and nulls exactly. */
function expectStats(actual: ModelStats | undefined, expected: Expected): void {
  expect(actual).toBeDefined();
  for (const [k, v] of Object.entries(expected) as [keyof Expected, Expected[keyof Expected]][]) {
    const got = actual![k];
    if (typeof v === 'number' && !COUNTS.has(k)) {
      expect([k, got]).toEqual([k, expect.closeTo(v, 9)]);
    } else {
      expect([k, got]).toEqual([k, v]);
    }
  }
}

function expectTable(rows: ModelStats[], expected: Expected[]): void {
  expect(sorted(rows).map(keyOf)).toEqual(expected.map(keyOf).sort((a, b) => a.localeCompare(b)));
  const byKey = new Map(rows.map((r) => [keyOf(r), r]));
  for (const e of expected) expectStats(byKey.get(keyOf(e)), e);
}

/** The rows without computed_at, which moves with each run: what "the same table" means. */
const stable = (rows: ModelStats[]) => sorted(rows).map(({ computedAt: _at, ...rest }) => rest);

export function aggregationContract(name: string, open: () => Promise<AggregationStoreHandle>): void {
  for (const engine of ENGINES) engineContract(`${name}, ${engine.name}`, engine, open);
}

function engineContract(name: string, engine: Engine, open: () => Promise<AggregationStoreHandle>): void {
  describe(`learning aggregation: ${name}`, () => {
    let h: AggregationStoreHandle;
    let repo: ModelStatsRepository;
    const run = (p: AggregationParams, r = repo) => engine.run(r, p);
    beforeAll(async () => {
      h = await open();
      repo = new ModelStatsRepository(h.store);
    });
    afterAll(() => h?.cleanup());
    beforeEach(async () => {
      await h.store.query(`TRUNCATE decision_traces, feedback, ${DERIVED_TABLES}`, []);
    });

    it('computes the hand-computed figures, and a second run gives the same table', async () => {
      await seed(h.store);
      expect(await run(PARAMS)).toBe('done');
      const first = await repo.loadAll();
      expectTable(first, EXPECTED);
      expect(first.every((r) => r.computedAt instanceof Date && !Number.isNaN(r.computedAt.getTime()))).toBe(true);

      expect(await run(PARAMS)).toBe('done');
      const second = await repo.loadAll();
      expect(stable(second)).toEqual(stable(first));
      const { rows } = await h.store.query<{ n: number }>('SELECT count(*)::int AS n FROM model_stats', []);
      expect(rows[0].n).toBe(EXPECTED.length);
    });

    it('takes in a late trace, a replaced answer and expired data on the next run, never adding twice', async () => {
      await seed(h.store);
      await run(PARAMS);

      // s3's feedback (2, not useful: y = 0.12) was waiting for a successful trace; now one for m-a arrives.
      await trace(h.store, { org: 'acme', session: 's3', provider: 'p1', model: 'm-a', latency: 400, cost: 0.004, ageHours: 0.5 });
      // s1 answers again: 5, useful → y = 0.3 + 0.4 = 0.7 replaces 0.94.
      await feedback(h.store, 'acme', 's1', 5, true);
      await run(PARAMS);
      await run(PARAMS);

      /*
       * acme p1/m-a now: samples s1 0.70, s2 0.42, s3 0.12 → n 3, mean 1.24/3 = 0.413333…;
       * deviations 0.286667, 0.006667, −0.293333 → squares 0.082178, 0.000044, 0.086044 → var 0.168267/3 = 0.056089…;
       * score 0.5, 0.7, 0.2 → mean 1.4/3, var ((0.033333)² + (0.233333)² + (0.266667)²)/3 = 0.126667/3;
       * useful 1, 0, 0 → 1/3, 2/9; NPS: 5 and 2 detractors, 7 passive → 2 / 1 / 0;
       * requests 5, ok 4 → 0.8; ok latencies 100, 200, 300, 400 → p50 250, p90 at 2.7 → 370, p99 at 2.97 → 397;
       * cost (0.001 + 0.003 + 0.002 + 0.004)/4 = 0.0025.
       */
      const rows = await repo.loadAll();
      const snapshot = new StatsSnapshotService();
      snapshot.replace(rows, new Date());
      expectStats(snapshot.get('acme', 'p1', 'm-a'), row({
        orgId: 'acme', provider: 'p1', model: 'm-a', n: 3, outcomeMean: 1.24 / 3, outcomeVar: 0.168266666666667 / 3,
        scoreMean: 1.4 / 3, scoreVar: 0.126666666666667 / 3, usefulRate: 1 / 3, usefulVar: 2 / 9, successRate: 0.8, requests: 5,
        latencyP50Ms: 250, latencyP90Ms: 370, latencyP99Ms: 397, costMeanUsd: 0.0025, npsDetractors: 2, npsPassives: 1,
      }));
      // m-b still has s3 only as a failure: unchanged.
      expectStats(snapshot.get('acme', 'p2', 'm-b'), acmeB);
      // The pool moved with acme: samples 0.70, 0.42, 0.12, 0.18 → n 4, mean 1.42/4 = 0.355.
      expect(snapshot.pool('p1', 'm-a')).toMatchObject({ n: 4, requests: 6, npsDetractors: 3 });
      expect(snapshot.pool('p1', 'm-a')!.outcomeMean).toBeCloseTo(0.355, 9);

      // Everything of a pair leaves the window: its rows go, in the organisation and in the pool.
      await engine.expireMc(h.store, repo);
      const after = await repo.loadAll();
      expect(after.filter((r) => r.model === 'm-c')).toEqual([]);
      expect(after).toHaveLength(EXPECTED.length - 2);
    });

    it('counts each failed attempt as a failed request of its target, and attributes feedback only to the one that served', async () => {
      const a503: FailedAttempt = { provider: 'p1', model: 'm-a', error: 'status', status: 503 };
      const aTimeout: FailedAttempt = { provider: 'p1', model: 'm-a', error: 'timeout', status: null };
      // acme f1: m-a failed twice (two of its targets' calls, e.g. a comma list naming it twice), then m-b served.
      await trace(h.store, { org: 'acme', session: 'f1', provider: 'p2', model: 'm-b', latency: 300, cost: 0.01, failed: [a503, aTimeout] });
      await feedback(h.store, 'acme', 'f1', 8, true);
      // Outside the window: its failed attempt counts no more than its trace.
      await trace(h.store, { org: 'acme', session: 'old', provider: 'p2', model: 'm-b', latency: 1, failed: [a503], ageHours: 40 * DAY_HOURS });
      await run(PARAMS);

      // m-a: requests 2, none ok; no latency or cost (they are over successful requests); no feedback (n 0).
      const acmeFailedA = row({ orgId: 'acme', provider: 'p1', model: 'm-a', requests: 2, successRate: 0 });
      // m-b: 1 of 1 ok, f1's feedback y = 0.6·0.8 + 0.4 = 0.88 (score 8: a passive).
      const acmeServedB = row({
        orgId: 'acme', provider: 'p2', model: 'm-b', n: 1, outcomeMean: 0.88, scoreMean: 0.8, usefulRate: 1, latencyP50Ms: 300,
        latencyP90Ms: 300, latencyP99Ms: 300, costMeanUsd: 0.01, npsPassives: 1,
      });
      expectTable(await repo.loadAll(), [acmeFailedA, acmeServedB, { ...acmeFailedA, orgId: '*' }, { ...acmeServedB, orgId: '*' }]);

      // acme f2: every target failed (m-a on the network, m-b with a 500); none is named as selected.
      // beta g1: m-a failed, then m-b served.
      await trace(h.store, {
        org: 'acme', session: 'f2', provider: null, model: null, status: 502, latency: 900,
        failed: [{ provider: 'p1', model: 'm-a', error: 'network', status: null }, { provider: 'p2', model: 'm-b', error: 'status', status: 500 }],
      });
      await feedback(h.store, 'acme', 'f2', 0, false);
      await trace(h.store, { org: 'beta', session: 'g1', provider: 'p2', model: 'm-b', latency: 100, cost: 0.02, failed: [a503] });
      await run(PARAMS);
      const second = await repo.loadAll();
      await run(PARAMS);
      expect(stable(await repo.loadAll())).toEqual(stable(second));

      // acme m-a 3 requests, 0 ok; acme m-b 2 requests (f1 ok, f2's failure), n still 1 (f2 attributes nothing).
      // beta m-a 1 request, 0 ok; beta m-b 1 of 1. Pool: m-a 4 requests, 0 ok; m-b 3, 2 ok, latencies 100 and 300.
      const betaFailedA = row({ orgId: 'beta', provider: 'p1', model: 'm-a', successRate: 0 });
      const betaServedB = row({ orgId: 'beta', provider: 'p2', model: 'm-b', latencyP50Ms: 100, latencyP90Ms: 100, latencyP99Ms: 100, costMeanUsd: 0.02 });
      expectTable(second, [
        { ...acmeFailedA, requests: 3 },
        { ...acmeServedB, requests: 2, successRate: 0.5 },
        betaFailedA,
        betaServedB,
        { ...acmeFailedA, orgId: '*', requests: 4 },
        {
          ...acmeServedB, orgId: '*', requests: 3, successRate: 2 / 3, latencyP50Ms: 200, latencyP90Ms: 280, latencyP99Ms: 298, costMeanUsd: 0.015,
        },
      ]);
    });

    it('uses the configured window and weights', async () => {
      await seed(h.store);
      // A 2-day window leaves out the 40-day-old rows as before; weights 1 / 0 make y the score alone.
      await run({ windowSeconds: 2 * 86_400, weights: { score: 1, useful: 0 } });
      const snapshot = new StatsSnapshotService();
      snapshot.replace(await repo.loadAll(), new Date());
      expect(snapshot.get('acme', 'p1', 'm-a')!.outcomeMean).toBeCloseTo(0.8, 9);
      expect(snapshot.get('acme', 'p1', 'm-a')!.outcomeVar).toBeCloseTo(0.01, 9);
      // A 30-minute window holds none of the seeded traces (they are an hour old): an empty table.
      await run({ windowSeconds: 1_800, weights: PARAMS.weights });
      expect(await repo.loadAll()).toEqual([]);
    });

    it('is safe when replicas run it at the same moment: one consistent table, no error', async () => {
      await seed(h.store);
      const peer = await h.peer();
      const peerRepo = new ModelStatsRepository(peer);
      const results = await Promise.all([run(PARAMS), run(PARAMS, peerRepo), run(PARAMS), run(PARAMS, peerRepo)]);
      expect(results).toContain('done');
      for (const r of results) expect(['done', 'skipped']).toContain(r);
      expectTable(await repo.loadAll(), EXPECTED);
    });

    it('serves through the snapshot exactly what the table holds', async () => {
      await seed(h.store);
      await run(PARAMS);
      const rows = await repo.loadAll();
      const snapshot = new StatsSnapshotService();
      expect(snapshot.refreshedAt).toBeNull();
      expect(snapshot.get('acme', 'p1', 'm-a')).toBeUndefined();
      const at = new Date();
      snapshot.replace(rows, at);
      expect(snapshot.refreshedAt).toBe(at);
      for (const r of rows) expect(snapshot.get(r.orgId, r.provider, r.model)).toEqual(r);
      expectStats(snapshot.pool('p1', 'm-a'), poolA);
      expect(snapshot.get('acme', 'p9', 'm-a')).toBeUndefined();
      expect(snapshot.get('gamma', 'p1', 'm-a')).toBeUndefined();
      // Σ n over the organisation's pairs: acme 2 + 2 + 0 + 0, beta 1; an organisation without feedback is at day zero.
      expect(snapshot.orgSamples('acme')).toBe(4);
      expect(snapshot.orgSamples('beta')).toBe(1);
      expect(snapshot.orgSamples('gamma')).toBe(0);
    });
  });
}
