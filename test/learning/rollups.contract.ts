/**
 * The rollups against their oracles on randomised worlds: the beat's model_stats against the full
 * recompute over the same bucket-aligned window, the stop rules' per-arm figures against the reading
 * of the experiment's traces, the regression detector's figures against the reading of the window's
 * traces. Counts exactly, means and variances to 1e-9, latency percentiles within the histogram's
 * 1 % (src/learning/rollups/latency-histogram.ts). One suite, run on PGlite and on a real Postgres;
 * what needs two connections at once (replicas beating together, writers committing out of order)
 * runs where there are two.
 */
import { randomUUID } from 'node:crypto';
import { ExperimentStatsRepository, type ArmStats } from '../../src/experiments/experiment-stats.repository';
import type { ModelStats } from '../../src/learning/model-stats';
import { ModelStatsRepository } from '../../src/learning/model-stats.repository';
import { RegressionsRepository } from '../../src/routing/regressions/regressions.repository';
import { mulberry32 } from '../../src/routing/strategies/random';
import { SqlStore, type SqlExecutor, type SqlResult } from '../../src/stores/sql/sql-store';
import { DERIVED_TABLES } from './aggregation.contract';
import { experimentStatsFromTraces, qualityFiguresFromTraces } from './oracles';

export interface RollupStoreHandle {
  store: SqlStore;
  /** A second client of the same database, as another replica has (PGlite: the same store). */
  peer(): Promise<SqlStore>;
  cleanup(): Promise<void>;
}

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;
const WINDOW_SECONDS = 30 * 86_400;
const WEIGHTS = { score: 0.6, useful: 0.4 };
const PARAMS = { windowSeconds: WINDOW_SECONDS, weights: WEIGHTS };
const ORGS = ['acme', 'beta', 'gamma'];
const PAIRS: Array<[string, string]> = [['p1', 'm-a'], ['p1', 'm-b'], ['p2', 'm-c'], ['p3', 'm-d']];
const ARMS = ['baseline', 'candidate', 'baseline_fallback', 'candidate_fallback'];

interface TraceRow {
  org: string;
  session: string | null;
  endpoint: string;
  provider: string | null;
  model: string | null;
  status: number;
  latency: number;
  cost: number | null;
  createdAt: Date;
  failed: Array<{ provider: string; model: string }> | null;
  experimentId: string | null;
  arm: string | null;
}

const INSERT_TRACES = `
  INSERT INTO decision_traces (request_id, org_id, api_key_id, session_id, endpoint, requested_model, selected_provider, selected_model,
                               status, latency_ms, cost_usd, created_at, failed_attempts, experiment_id, experiment_arm)
  SELECT 'r-' || md5(random()::text), o, 'k', s, e, COALESCE(m, 'auto'), p, m, st, l, c, at, fa, x, a
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::float8[], $8::float8[], $9::timestamptz[],
              $10::jsonb[], $11::uuid[], $12::text[]) AS u (o, s, e, p, m, st, l, c, at, fa, x, a)`;

async function insertTraces(sql: SqlExecutor, rows: TraceRow[]): Promise<void> {
  if (rows.length === 0) return;
  await sql.query(INSERT_TRACES, [
    rows.map((r) => r.org),
    rows.map((r) => r.session),
    rows.map((r) => r.endpoint),
    rows.map((r) => r.provider),
    rows.map((r) => r.model),
    rows.map((r) => r.status),
    rows.map((r) => r.latency),
    rows.map((r) => r.cost),
    rows.map((r) => r.createdAt.toISOString()),
    rows.map((r) => (r.failed ? JSON.stringify(r.failed) : null)),
    rows.map((r) => r.experimentId),
    rows.map((r) => r.arm),
  ]);
}

interface Answer {
  org: string;
  session: string;
  score: number;
  useful: boolean;
  /** When it was given (an answer held through an outage is written later with its time). */
  at: Date;
}

const UPSERT_FEEDBACK = `
  INSERT INTO feedback (org_id, session_id, score, useful, created_at, updated_at)
  SELECT o, s, sc, u, t, t FROM unnest($1::text[], $2::text[], $3::int[], $4::bool[], $5::timestamptz[]) AS h (o, s, sc, u, t)
  ON CONFLICT (org_id, session_id) DO UPDATE SET score = EXCLUDED.score, useful = EXCLUDED.useful, updated_at = EXCLUDED.updated_at`;

async function upsertFeedback(sql: SqlExecutor, answers: Answer[]): Promise<void> {
  // One row per session per statement (ON CONFLICT cannot touch a row twice): the last answer wins.
  const latest = new Map(answers.map((a) => [`${a.org}/${a.session}`, a]));
  const rows = [...latest.values()];
  if (rows.length === 0) return;
  await sql.query(UPSERT_FEEDBACK, [rows.map((a) => a.org), rows.map((a) => a.session), rows.map((a) => a.score), rows.map((a) => a.useful), rows.map((a) => a.at.toISOString())]);
}

interface Experiment {
  id: string;
  orgId: string;
  startedAt: Date;
}

/** A seeded world: organisations, their sessions, experiments, and a generator of traffic. */
class World {
  readonly random: () => number;
  private readonly sessions = new Map<string, string[]>();
  experiments: Experiment[] = [];
  /** An experiment that ended: its traces are no one's figures any more. */
  endedExperiment: string | null = null;

  constructor(seed: number) {
    this.random = mulberry32(seed);
  }

  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.random() * xs.length)];
  }

  chance(p: number): boolean {
    return this.random() < p;
  }

  /** A session of the organisation: mostly one seen before, sometimes a new one. */
  session(org: string): string {
    const list = this.sessions.get(org) ?? [];
    this.sessions.set(org, list);
    if (list.length === 0 || this.chance(0.3)) list.push(`${org}-s${list.length}`);
    return this.pick(list);
  }

  /** How old a trace or an answer is: most inside the 30 days, some around the edge, a few beyond or ahead. */
  age(now: number): Date {
    const r = this.random();
    if (r < 0.8) return new Date(now - this.random() * 29 * DAY_MS);
    if (r < 0.93) return new Date(now - 29 * DAY_MS - this.random() * 2 * DAY_MS);
    if (r < 0.98) return new Date(now - 31 * DAY_MS - this.random() * 10 * DAY_MS);
    return new Date(now + this.random() * HOUR_MS);
  }

  latency(): number {
    if (this.chance(0.08)) return this.pick([0, 100, 250, 1000]);
    return Math.exp(Math.log(3) + this.random() * (Math.log(30_000) - Math.log(3)));
  }

  trace(now: number): TraceRow {
    let org = this.pick(ORGS);
    let createdAt = this.age(now);
    let experimentId: string | null = null;
    let arm: string | null = null;
    if (this.experiments.length && this.chance(0.4)) {
      const e = this.pick(this.experiments);
      experimentId = this.chance(0.9) ? e.id : (this.endedExperiment ?? randomUUID());
      arm = this.pick(ARMS);
      // Mostly its own organisation's traffic since it started; some from before (minus the 5
      // minutes' margin) and some another organisation's, which are no one's figures.
      if (this.chance(0.9)) org = e.orgId;
      if (this.chance(0.9)) createdAt = new Date(e.startedAt.getTime() - 4 * 60_000 + this.random() * (now - e.startedAt.getTime()));
    }
    const session = this.chance(0.12) ? null : this.session(org);
    const endpoint = this.pick(['chat', 'chat', 'chat', 'chat', 'responses', 'embeddings']);
    const noRoute = this.chance(0.05);
    const pair = this.pick(PAIRS);
    const status = noRoute ? 502 : this.pick([200, 200, 200, 200, 200, 200, 200, 502, 500, 429]);
    const failed = noRoute
      ? [this.pick(PAIRS), this.pick(PAIRS)].map(([provider, model]) => ({ provider, model }))
      : this.chance(0.15)
        ? Array.from({ length: 1 + Math.floor(this.random() * 2) }, () => this.pick(PAIRS)).map(([provider, model]) => ({ provider, model }))
        : null;
    return {
      org,
      session,
      endpoint,
      provider: noRoute ? null : pair[0],
      model: noRoute ? null : pair[1],
      status,
      latency: this.latency(),
      cost: this.chance(0.7) ? Math.round(this.random() * 50_000) / 1e6 : null,
      createdAt,
      failed,
      experimentId,
      arm,
    };
  }

  answer(now: number): Answer {
    const org = this.pick(ORGS);
    return {
      org,
      session: this.session(org),
      score: Math.floor(this.random() * 11),
      useful: this.chance(0.6),
      at: this.chance(0.7) ? new Date(now - this.random() * HOUR_MS) : this.age(now),
    };
  }
}

/** The real store, but the `failAt`-th statement of each transaction fails: a replica dying half-way through a beat. */
export class FailingStore extends SqlStore {
  constructor(
    private readonly inner: SqlStore,
    private readonly failAt: number,
  ) {
    super();
  }

  get kind() {
    return this.inner.kind;
  }

  query<R extends object>(sql: string, params?: readonly unknown[]): Promise<SqlResult<R>> {
    return this.inner.query<R>(sql, params);
  }

  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    return this.inner.transaction(async (tx) => {
      let n = 0;
      return fn({
        query: <R extends object>(sql: string, params?: readonly unknown[]): Promise<SqlResult<R>> =>
          ++n === this.failAt ? Promise.reject(new Error('the replica died half-way through the beat')) : tx.query<R>(sql, params),
      });
    });
  }

  ping(ms: number): Promise<void> {
    return this.inner.ping(ms);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

const key = (s: { orgId: string; provider: string; model: string }) => `${s.orgId}/${s.provider}/${s.model}`;
const FIGURES: Array<keyof ModelStats> = ['outcomeMean', 'outcomeVar', 'scoreMean', 'scoreVar', 'usefulRate', 'usefulVar', 'successRate'];
const COUNTS: Array<keyof ModelStats> = ['n', 'requests', 'npsDetractors', 'npsPassives', 'npsPromoters'];
const PERCENTILES: Array<keyof ModelStats> = ['latencyP50Ms', 'latencyP90Ms', 'latencyP99Ms'];

/** Within the histogram's error: 1 % of the value, or its floor 0.01 ms below it. */
function expectPercentile(label: string, got: number | null, want: number | null): void {
  if (want === null || got === null) {
    expect([label, got]).toEqual([label, want]);
    return;
  }
  const tolerance = 0.01 * Math.abs(want) + 0.01 + 1e-9;
  if (Math.abs(got - want) > tolerance) expect([label, got]).toEqual([label, want]);
}

function expectClose(label: string, got: number | null, want: number | null, digits = 1e-9): void {
  if (want === null || got === null) {
    expect([label, got]).toEqual([label, want]);
    return;
  }
  if (Math.abs(got - want) > digits) expect([label, got]).toEqual([label, want]);
}

function expectSameStats(beat: ModelStats[], oracle: ModelStats[]): void {
  expect(beat.map(key).sort()).toEqual(oracle.map(key).sort());
  const byKey = new Map(beat.map((r) => [key(r), r]));
  for (const o of oracle) {
    const b = byKey.get(key(o))!;
    for (const k of COUNTS) expect([key(o), k, b[k]]).toEqual([key(o), k, o[k]]);
    for (const k of FIGURES) expectClose(`${key(o)} ${k}`, b[k] as number, o[k] as number);
    expectClose(`${key(o)} costMeanUsd`, b.costMeanUsd, o.costMeanUsd);
    for (const k of PERCENTILES) expectPercentile(`${key(o)} ${k}`, b[k] as number | null, o[k] as number | null);
  }
}

function expectSameArm(label: string, got: ArmStats, want: ArmStats): void {
  expect([label, got.feedbackSessions, got.requests, got.errors]).toEqual([label, want.feedbackSessions, want.requests, want.errors]);
  expectClose(`${label} scoreMean`, got.scoreMean, want.scoreMean);
  expectClose(`${label} usefulRate`, got.usefulRate, want.usefulRate);
  expectClose(`${label} costMeanUsd`, got.costMeanUsd, want.costMeanUsd);
  expectPercentile(`${label} latencyP50Ms`, got.latencyP50Ms, want.latencyP50Ms);
}

/*
 * The window's sums equal the sums of its buckets (what "derived by merging the buckets" means for
 * sums kept by adding and subtracting): scalars and every latency bin.
 */
const WINDOW_VS_BUCKETS = `
  WITH h AS (
    SELECT org_id, provider, model, sum(requests) AS requests, sum(ok) AS ok, sum(cost_n) AS cost_n, sum(cost_sum) AS cost_sum
    FROM rollup_model_hours GROUP BY 1, 2, 3
  ),
  s AS (
    SELECT org_id, provider, model, sum(n) AS n, sum(score_sum) AS score_sum, sum(score_sq_sum) AS score_sq_sum, sum(useful_sum) AS useful_sum,
           sum(score_useful_sum) AS score_useful_sum, sum(nps_detractors) AS d, sum(nps_passives) AS p, sum(nps_promoters) AS pr
    FROM rollup_sample_hours GROUP BY 1, 2, 3
  ),
  b AS (
    SELECT h.org_id, h.provider, h.model, u.bin, sum(u.n) AS n, sum(u.total) AS total
    FROM rollup_model_hours h CROSS JOIN LATERAL unnest(h.latency_bins, h.latency_n, h.latency_sum) AS u (bin, n, total)
    GROUP BY 1, 2, 3, 4
  )
  SELECT 'scalar' AS what, w.org_id, w.provider, w.model FROM rollup_window w
  LEFT JOIN h ON h.org_id = w.org_id AND h.provider = w.provider AND h.model = w.model
  LEFT JOIN s ON s.org_id = w.org_id AND s.provider = w.provider AND s.model = w.model
  WHERE w.requests <> COALESCE(h.requests, 0) OR w.ok <> COALESCE(h.ok, 0) OR w.cost_n <> COALESCE(h.cost_n, 0) OR w.cost_sum <> COALESCE(h.cost_sum, 0)
     OR w.n <> COALESCE(s.n, 0) OR w.score_sum <> COALESCE(s.score_sum, 0) OR w.score_sq_sum <> COALESCE(s.score_sq_sum, 0)
     OR w.useful_sum <> COALESCE(s.useful_sum, 0) OR w.score_useful_sum <> COALESCE(s.score_useful_sum, 0)
     OR w.nps_detractors <> COALESCE(s.d, 0) OR w.nps_passives <> COALESCE(s.p, 0) OR w.nps_promoters <> COALESCE(s.pr, 0)
  UNION ALL
  SELECT 'bucket without window row', h.org_id, h.provider, h.model FROM h
  WHERE h.requests > 0 AND NOT EXISTS (SELECT 1 FROM rollup_window w WHERE w.org_id = h.org_id AND w.provider = h.provider AND w.model = h.model)
  UNION ALL
  SELECT 'latency bin', COALESCE(w.org_id, b.org_id), COALESCE(w.provider, b.provider), COALESCE(w.model, b.model)
  FROM (SELECT * FROM rollup_window_latency WHERE n <> 0) w
  FULL JOIN b ON b.org_id = w.org_id AND b.provider = w.provider AND b.model = w.model AND b.bin = w.bin
  WHERE w.n IS DISTINCT FROM b.n OR w.total IS DISTINCT FROM b.total`;

async function expectWindowIsItsBuckets(sql: SqlExecutor): Promise<void> {
  const { rows } = await sql.query(WINDOW_VS_BUCKETS, []);
  expect(rows).toEqual([]);
}

async function windowStart(sql: SqlExecutor): Promise<Date> {
  const { rows } = await sql.query<{ window_start: Date | string }>(`SELECT window_start FROM rollup_state WHERE name = 'learning'`, []);
  return new Date(rows[0].window_start);
}

export function rollupsContract(name: string, open: () => Promise<RollupStoreHandle>): void {
  describe(`rollups against their oracles: ${name}`, () => {
    let h: RollupStoreHandle;
    let repo: ModelStatsRepository;
    beforeAll(async () => {
      h = await open();
      repo = new ModelStatsRepository(h.store);
      await h.store.query(`INSERT INTO organizations (id, name, plan) SELECT o, o, 'pro' FROM unnest($1::text[]) AS o ON CONFLICT DO NOTHING`, [ORGS]);
    });
    afterAll(() => h?.cleanup());
    beforeEach(async () => {
      await h.store.query(
        `TRUNCATE decision_traces, feedback, regressions, ${DERIVED_TABLES}, rollup_experiment_arms, rollup_experiment_latency, rollup_experiment_sessions`,
        [],
      );
    });

    /** The beat, then the oracle over the beat's window: the same table, within the stated errors. */
    async function beatMatchesOracle(at?: Date): Promise<ModelStats[]> {
      expect(await repo.recompute({ ...PARAMS, at })).toBe('done');
      const beat = await repo.loadAll();
      await expectWindowIsItsBuckets(h.store);
      expect(await repo.recomputeFromTraces({ ...PARAMS, windowStart: await windowStart(h.store) })).toBe('done');
      const oracle = await repo.loadAll();
      expectSameStats(beat, oracle);
      return oracle;
    }

    it('model_stats: rounds of late traces, failed attempts, changed and early answers, a moving window; the beat equals the full recompute', async () => {
      const world = new World(20_250_601);
      const now = Date.now();
      // The window's end moves forward between rounds: buckets leave it, contributions die.
      const ends = [0, 0, 3 * HOUR_MS, 2 * DAY_MS, 2 * DAY_MS, 9 * DAY_MS];
      for (const [round, end] of ends.entries()) {
        // Answers before their sessions' traces, traces of sessions answered rounds ago, answers changed.
        await upsertFeedback(h.store, Array.from({ length: 40 }, () => world.answer(now)));
        await insertTraces(h.store, Array.from({ length: 120 }, () => world.trace(now)));
        await upsertFeedback(h.store, Array.from({ length: 25 }, () => world.answer(now)));
        await insertTraces(h.store, Array.from({ length: 60 }, () => world.trace(now)));
        const at = end === 0 ? undefined : new Date(now + end);
        const oracle = await beatMatchesOracle(at);
        // A beat with nothing new changes nothing.
        if (round === 1) await beatMatchesOracle(at);
        // Not a comparison of empty tables: samples, failures and latencies in every round.
        expect(oracle.filter((r) => r.orgId !== '*' && r.n > 0).length).toBeGreaterThan(6);
        expect(oracle.some((r) => r.successRate < 1 && r.latencyP99Ms !== null)).toBe(true);
      }
      // The window moved: buckets left it and were deleted.
      const { rows } = await h.store.query<{ n: number }>(`SELECT count(*)::int AS n FROM rollup_model_hours WHERE bucket < $1`, [await windowStart(h.store)]);
      expect([rows[0].n, (await windowStart(h.store)).getTime()]).toEqual([0, expect.any(Number)]);
      expect((await windowStart(h.store)).getTime()).toBeGreaterThan(now - 30 * DAY_MS + 8 * DAY_MS);
    });

    it('model_stats: a beat cut off half-way adds nothing; the next one takes everything in once', async () => {
      const world = new World(7);
      const now = Date.now();
      await insertTraces(h.store, Array.from({ length: 150 }, () => world.trace(now)));
      await upsertFeedback(h.store, Array.from({ length: 60 }, () => world.answer(now)));
      await beatMatchesOracle();
      for (const failAt of [3, 5, 6, 8]) {
        await insertTraces(h.store, Array.from({ length: 80 }, () => world.trace(now)));
        await upsertFeedback(h.store, Array.from({ length: 30 }, () => world.answer(now)));
        await expect(new ModelStatsRepository(new FailingStore(h.store, failAt)).recompute(PARAMS)).rejects.toThrow('half-way');
        await beatMatchesOracle();
      }
    });

    it('model_stats: traces and answers written before the rollups existed are taken in by a backfill, chunk by chunk over beats, the table kept until it is done', async () => {
      const world = new World(11);
      const now = Date.now();
      await insertTraces(h.store, Array.from({ length: 200 }, () => world.trace(now)));
      await upsertFeedback(h.store, Array.from({ length: 80 }, () => world.answer(now)));
      // As rows written before migration 0006 are: no txid.
      await h.store.query('UPDATE decision_traces SET txid = NULL', []);
      await h.store.query('ALTER TABLE feedback DISABLE TRIGGER feedback_stamp_txid', []);
      await h.store.query('UPDATE feedback SET txid = NULL', []);
      await h.store.query('ALTER TABLE feedback ENABLE TRIGGER feedback_stamp_txid', []);
      // The table as the previous version left it.
      await repo.recomputeFromTraces(PARAMS);
      // loadAll has no order, and the plan changes as the backfill analyses the tables it fills: compare by key.
      const table = async () => (await repo.loadAll()).sort((a, b) => key(a).localeCompare(key(b)));
      const before = await table();
      expect(before.length).toBeGreaterThan(0);
      // One chunk of 25 rows per beat, while new traffic keeps coming (taken in by txid meanwhile).
      const small = { ...PARAMS, backfill: { budgetMs: 0, chunkRows: 25 } };
      let beats = 0;
      for (;;) {
        await insertTraces(h.store, Array.from({ length: 5 }, () => world.trace(now)));
        await upsertFeedback(h.store, Array.from({ length: 3 }, () => world.answer(now)));
        expect(await repo.recompute(small)).toBe('done');
        beats++;
        const { rows } = await h.store.query<{ pending: boolean }>(`SELECT backfill_txid IS NOT NULL AS pending FROM rollup_state WHERE name = 'learning'`, []);
        if (!rows[0].pending) break;
        // Partial sums never reach the table: it still holds what it held.
        expect(await table()).toEqual(before);
      }
      expect(beats).toBeGreaterThan(3);
      // The tables the backfill filled from empty were analysed as they grew: the planner's row count
      // of the session pairs is no further than a factor of two below the table's (an empty-looking
      // table lets the pair lookup run on an index whose range grows with the table).
      const { rows: est } = await h.store.query<{ planned: number; actual: number }>(
        `SELECT (SELECT reltuples FROM pg_class WHERE oid = 'rollup_session_pairs'::regclass)::float8 AS planned, (SELECT count(*) FROM rollup_session_pairs)::float8 AS actual`,
        [],
      );
      expect(est[0].actual).toBeGreaterThan(50);
      expect(est[0].planned).toBeGreaterThanOrEqual(est[0].actual / 2);
      await beatMatchesOracle();
    });

    it('stop rules: per-arm figures from the rollups equal the reading of the experiment traces, through rounds', async () => {
      const world = new World(424_242);
      const now = Date.now();
      const experiments = await h.store.query<{ id: string; org_id: string; started_at: Date }>(
        `INSERT INTO experiments (org_id, type, status, traffic_pct, baseline_provider, baseline_model, candidate_provider, candidate_model,
                                  min_n, max_regression, started_at)
         SELECT o, 'canary', 'active', 50, 'p1', 'm-a', 'p1', 'm-b', 1000, 0.05, now() - d * interval '1 day'
         FROM unnest($1::text[], $2::float8[]) AS u (o, d)
         RETURNING id, org_id, started_at`,
        [['acme', 'beta'], [10, 2]],
      );
      world.experiments = experiments.rows.map((r) => ({ id: r.id, orgId: r.org_id, startedAt: new Date(r.started_at) }));
      const ended = await h.store.query<{ id: string }>(
        `INSERT INTO experiments (org_id, type, status, traffic_pct, baseline_provider, baseline_model, candidate_provider, candidate_model,
                                  min_n, max_regression, started_at, ended_at)
         VALUES ('acme', 'canary', 'completed', 50, 'p1', 'm-a', 'p2', 'm-c', 10, 0.05, now() - interval '5 days', now()) RETURNING id`,
        [],
      );
      world.endedExperiment = ended.rows[0].id;
      const stats = new ExperimentStatsRepository(h.store);
      for (let round = 0; round < 5; round++) {
        await upsertFeedback(h.store, Array.from({ length: 30 }, () => world.answer(now)));
        await insertTraces(h.store, Array.from({ length: 150 }, () => world.trace(now)));
        await upsertFeedback(h.store, Array.from({ length: 30 }, () => world.answer(now)));
        if (round === 2) {
          await insertTraces(h.store, Array.from({ length: 60 }, () => world.trace(now)));
          await expect(new ExperimentStatsRepository(new FailingStore(h.store, 4)).armStats({ ...world.experiments[0], createdAt: world.experiments[0].startedAt })).rejects.toThrow('half-way');
        }
        for (const e of world.experiments) {
          const got = await stats.armStats({ ...e, createdAt: e.startedAt });
          const want = await experimentStatsFromTraces(h.store, e);
          expectSameArm(`${e.id} baseline round ${round}`, got.baseline, want.baseline);
          expectSameArm(`${e.id} candidate round ${round}`, got.candidate, want.candidate);
          // Not a comparison of empty arms: by the last round each has requests and samples.
          if (round === 4) for (const arm of [want.baseline, want.candidate]) expect(Math.min(arm.requests, arm.feedbackSessions)).toBeGreaterThan(0);
        }
      }
      // Nothing of the ended experiment is kept.
      const sessionsOf = async (id: string) =>
        (await h.store.query<{ n: number }>(`SELECT count(*)::int AS n FROM rollup_experiment_sessions WHERE experiment_id = $1`, [id])).rows[0].n;
      expect(await sessionsOf(world.endedExperiment)).toBe(0);
      // An experiment that has just ended keeps its figures (another replica's round may still read
      // them and find it ended elsewhere); an hour later they go.
      const [first, second] = world.experiments;
      await h.store.query(`UPDATE experiments SET status = 'completed', ended_at = now() WHERE id = $1`, [second.id]);
      const justEnded = await stats.armStats({ ...second, createdAt: second.startedAt });
      const want = await experimentStatsFromTraces(h.store, second);
      expectSameArm('just ended, baseline', justEnded.baseline, want.baseline);
      expect(await sessionsOf(second.id)).toBeGreaterThan(0);
      await h.store.query(`UPDATE experiments SET ended_at = now() - interval '61 minutes' WHERE id = $1`, [second.id]);
      await stats.armStats({ ...first, createdAt: first.startedAt });
      expect(await sessionsOf(second.id)).toBe(0);
    });

    it('regression detector: its long-run and rolling figures equal the reading of the window traces', async () => {
      const world = new World(99);
      const now = Date.now();
      await insertTraces(h.store, Array.from({ length: 300 }, () => world.trace(now)));
      await upsertFeedback(h.store, Array.from({ length: 120 }, () => world.answer(now)));
      // Margin -2 and one sample: every pair with samples on both sides of the rolling start is recorded, with its figures.
      const rollingSeconds = 6 * 86_400;
      const found = await new RegressionsRepository(h.store).detectQualityDrops({
        longRunSeconds: WINDOW_SECONDS, rollingSeconds, weights: WEIGHTS, minSamples: 1, margin: -2,
      });
      expect(found).not.toBe('skipped');
      const { rows: starts } = await h.store.query<{ rolling: Date | string }>(
        `SELECT date_bin(interval '1 hour', now() - $1::float8 * interval '1 second' + interval '1 hour' - interval '1 microsecond', '2000-01-01 00:00:00+00'::timestamptz) AS rolling`,
        [rollingSeconds],
      );
      const oracle = await qualityFiguresFromTraces(h.store, { longStart: await windowStart(h.store), rollingStart: new Date(starts[0].rolling), weights: WEIGHTS });
      const eligible = oracle.filter((o) => o.rollingN >= 1 && o.longN - o.rollingN >= 1);
      expect(eligible.length).toBeGreaterThan(3);
      const { rows } = await h.store.query<{ org_id: string; provider: string; model: string; detail: Record<string, number> }>(
        `SELECT org_id, provider, model, detail FROM regressions WHERE reason = 'quality_drop'`,
        [],
      );
      expect(rows.map((r) => `${r.org_id}/${r.provider}/${r.model}`).sort()).toEqual(eligible.map(key).sort());
      for (const o of eligible) {
        const d = rows.find((r) => r.org_id === o.orgId && r.provider === o.provider && r.model === o.model)!.detail;
        expect([key(o), d.long_run_n, d.rolling_n]).toEqual([key(o), o.longN, o.rollingN]);
        expectClose(`${key(o)} long_run_mean`, d.long_run_mean, o.longMean);
        expectClose(`${key(o)} rolling_mean`, d.rolling_mean, o.rollingMean);
      }
    });

    it('two replicas beat at once while traces and answers keep coming: one consistent table, equal to the full recompute', async () => {
      const peer = await h.peer();
      const world = new World(5150);
      const now = Date.now();
      for (let round = 0; round < 4; round++) {
        const writes = (async () => {
          for (let i = 0; i < 4; i++) {
            await insertTraces(peer, Array.from({ length: 30 }, () => world.trace(now)));
            await upsertFeedback(h.store, Array.from({ length: 10 }, () => world.answer(now)));
          }
        })();
        const beats = await Promise.all([repo.recompute(PARAMS), new ModelStatsRepository(peer).recompute(PARAMS), repo.recompute(PARAMS)]);
        await writes;
        expect(beats).toContain('done');
        for (const b of beats) expect(['done', 'skipped']).toContain(b);
      }
      await beatMatchesOracle();
    });
  });
}
