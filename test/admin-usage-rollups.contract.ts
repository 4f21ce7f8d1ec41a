/**
 * Usage from the rollups against usage from the raw traces (docs/architecture.md "Usage from
 * rollups"): on randomised traces, every query (steps, groups, aligned and cut ranges, the minute
 * horizon's edge, the rollups' retention edge, cursor pages) answers what TraceUsageRepository, the
 * raw reader, answers: counts and codes exactly, cost to 1e-9, latency percentiles within the
 * histogram's 1 %; before the first beat, while a backfill is under way, with traces not taken in
 * yet, and after a rebuild. One suite, run on PGlite and on a real Postgres.
 */
import { TraceUsageRepository } from '../src/admin/usage/trace-usage.repository';
import { STEP_MS, USAGE_GROUPS, USAGE_STEPS, type UsageGroup, type UsageQuery, type UsageRow, type UsageStep } from '../src/admin/usage/usage-reader';
import { UsageRollupRepository } from '../src/admin/usage/usage-rollup.repository';
import type { AppConfig } from '../src/config/app-config';
import { pruneRollups } from '../src/retention/rollups-retention';
import { mulberry32 } from '../src/routing/strategies/random';
import type { SqlStore } from '../src/stores/sql/sql-store';

export interface UsageStoreHandle {
  store: SqlStore;
  cleanup(): Promise<void>;
}

const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;
const ORGS = ['acme', 'beta'];
const KEYS: Record<string, string[]> = { acme: ['acme-1', 'acme-2', 'acme-3'], beta: ['beta-1'] };
const PAIRS: Array<[string | null, string | null]> = [['p1', 'm-a'], ['p1', 'm-b'], ['p2', 'm-a'], ['p3', 'm-c'], [null, null], ['p2', null]];
const ROUTES = ['default', 'learned', null];
const STATUSES = [200, 200, 200, 200, 200, 201, 400, 429, 500, 502, 502];
const CODES = ['upstream_error', 'rate_limited', 'invalid_request', null];

const configWith = (rollupsDays: number | null) => ({ gateway: { retention: { rollups_days: rollupsDays } } }) as unknown as AppConfig;

const INSERT = `
  INSERT INTO decision_traces (request_id, org_id, api_key_id, endpoint, requested_model, route, selected_provider, selected_model,
                               status, error_code, latency_ms, cost_usd, prompt_tokens, completion_tokens, reasoning_tokens,
                               fallback_used, created_at)
  SELECT 'r-' || md5(random()::text), o, k, 'chat', 'auto', r, p, m, st, e, l, c, pt, ct, rt, f, at
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::text[], $8::float8[], $9::float8[],
              $10::int[], $11::int[], $12::int[], $13::bool[], $14::timestamptz[])
    AS u (o, k, r, p, m, st, e, l, c, pt, ct, rt, f, at)`;

interface Trace {
  org: string;
  key: string;
  route: string | null;
  provider: string | null;
  model: string | null;
  status: number;
  code: string | null;
  latency: number;
  cost: number | null;
  prompt: number | null;
  completion: number | null;
  reasoning: number | null;
  fallback: boolean;
  at: number;
}

class World {
  readonly random: () => number;
  constructor(seed: number) {
    this.random = mulberry32(seed);
  }
  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.random() * xs.length)];
  }
  chance(p: number): boolean {
    return this.random() < p;
  }
  /** Mostly the last 40 days; some inside the last hours (the minute horizon's and the open buckets' side), a few minutes ahead. */
  at(now: number): number {
    const r = this.random();
    if (r < 0.6) return now - this.random() * 40 * DAY;
    if (r < 0.95) return now - this.random() * 6 * HOUR;
    return now + this.random() * 10 * MINUTE;
  }
  latency(): number {
    if (this.chance(0.1)) return this.pick([0, 0.004, 100, 250, 1000]);
    return Math.exp(Math.log(0.5) + this.random() * (Math.log(60_000) - Math.log(0.5)));
  }
  trace(now: number): Trace {
    const org = this.pick(ORGS);
    const [provider, model] = this.pick(PAIRS);
    const status = this.pick(STATUSES);
    return {
      org,
      key: this.pick(KEYS[org]),
      route: this.pick(ROUTES),
      provider,
      model,
      status,
      code: status >= 400 || this.chance(0.05) ? this.pick(CODES) : null,
      latency: this.latency(),
      cost: this.chance(0.7) ? Math.round(this.random() * 50_000) / 1e6 : null,
      prompt: this.chance(0.8) ? Math.floor(this.random() * 2000) : null,
      completion: this.chance(0.8) ? Math.floor(this.random() * 800) : null,
      reasoning: this.chance(0.3) ? Math.floor(this.random() * 300) : null,
      fallback: this.chance(0.1),
      at: this.at(now),
    };
  }
  /** A query the API would accept: a step, a group, a range aligned or cut anywhere, at most 10,000 points. */
  query(now: number, limit: number): UsageQuery {
    for (;;) {
      const step: UsageStep = this.pick(USAGE_STEPS);
      const groupBy: UsageGroup | null = this.chance(0.3) ? null : this.pick(USAGE_GROUPS);
      const span = step === 'minute' ? this.pick([HOUR, 6 * HOUR, DAY, 3 * DAY, 6.5 * DAY]) : this.pick([HOUR, DAY, 7 * DAY, 30 * DAY, 45 * DAY]);
      const end = this.chance(0.5) ? now + this.random() * 20 * MINUTE : now - this.random() * 35 * DAY;
      const cut = (ms: number) => (this.chance(0.3) ? Math.floor(ms / STEP_MS[step]) * STEP_MS[step] : Math.floor(ms));
      const to = cut(end);
      const from = cut(to - span * (0.5 + this.random()));
      const points = Math.ceil(to / STEP_MS[step]) - Math.floor(from / STEP_MS[step]);
      if (from >= to || points > 10_000) continue;
      return { orgId: this.pick(ORGS), from: new Date(from), to: new Date(to), step, groupBy, after: null, limit };
    }
  }
}

async function insert(store: SqlStore, rows: Trace[], txidNull = false): Promise<void> {
  await store.query(INSERT, [
    rows.map((r) => r.org),
    rows.map((r) => r.key),
    rows.map((r) => r.route),
    rows.map((r) => r.provider),
    rows.map((r) => r.model),
    rows.map((r) => r.status),
    rows.map((r) => r.code),
    rows.map((r) => r.latency),
    rows.map((r) => r.cost),
    rows.map((r) => r.prompt),
    rows.map((r) => r.completion),
    rows.map((r) => r.reasoning),
    rows.map((r) => r.fallback),
    rows.map((r) => new Date(r.at).toISOString()),
  ]);
  // Traces written before the rollups existed carry no txid: only a backfill takes them in.
  if (txidNull) await store.query(`UPDATE decision_traces SET txid = NULL WHERE txid = (SELECT max(txid) FROM decision_traces)`, []);
}

/** Within the histogram's error: 1 % of the value, or its floor 0.01 ms below it. */
function percentileOk(got: number | null, want: number | null): boolean {
  if (got === null || want === null) return got === want;
  return Math.abs(got - want) <= 0.01 * Math.abs(want) + 0.01 + 1e-9;
}

/** A row of the rollups' answer beside the oracle's: the same point, the same figures. */
function same(got: UsageRow, want: UsageRow): boolean {
  const { latencyP50Ms, latencyP90Ms, latencyP99Ms, costUsd, ...exact } = got;
  const { latencyP50Ms: w50, latencyP90Ms: w90, latencyP99Ms: w99, costUsd: wCost, ...wantExact } = want;
  return (
    JSON.stringify(exact) === JSON.stringify(wantExact) &&
    Math.abs(costUsd - wCost) <= 1e-9 * Math.max(1, Math.abs(wCost)) &&
    percentileOk(latencyP50Ms, w50) &&
    percentileOk(latencyP90Ms, w90) &&
    percentileOk(latencyP99Ms, w99)
  );
}

const describeQuery = (q: UsageQuery) => `${q.orgId} ${q.step} ${q.groupBy ?? '-'} [${q.from.toISOString()}, ${q.to.toISOString()}) after ${q.after ? `${new Date(q.after.bucketMs).toISOString()}/${q.after.group}` : '-'} limit ${q.limit}`;

async function expectSameAnswers(rollups: UsageRollupRepository, oracle: TraceUsageRepository, queries: UsageQuery[]): Promise<void> {
  for (const q of queries) {
    const [got, want] = [await rollups.series(q), await oracle.series(q)];
    const bad = got.length !== want.length || got.some((r, i) => !same(r, want[i]));
    if (bad) expect([describeQuery(q), got]).toEqual([describeQuery(q), want]);
  }
}

export function usageRollupsContract(name: string, open: () => Promise<UsageStoreHandle>): void {
  describe(`usage from the rollups equals usage from the raw traces (${name})`, () => {
    let h: UsageStoreHandle;
    let rollups: UsageRollupRepository;
    let oracle: TraceUsageRepository;
    let world: World;
    let now: number;
    const queries = (n: number, limit = 1000) => Array.from({ length: n }, () => world.query(now, limit));
    const beat = (chunkRows = 10_000, budgetMs = 60_000) => rollups.catchUp({ chunkRows, budgetMs });

    beforeAll(async () => {
      h = await open();
      rollups = new UsageRollupRepository(h.store, configWith(400));
      oracle = new TraceUsageRepository(h.store);
      world = new World(20_251_125);
      now = Date.now();
    }, 120_000);
    afterAll(async () => {
      await h?.cleanup();
    });

    it('before the first beat, through a backfill in chunks and with traces not taken in yet', async () => {
      // Traces from before the rollups existed, and traces written since.
      await insert(h.store, Array.from({ length: 1200 }, () => world.trace(now)), true);
      await insert(h.store, Array.from({ length: 400 }, () => world.trace(now)));
      await expectSameAnswers(rollups, oracle, queries(10));

      // One chunk of 300 traces per beat: the rest of the backfill is read from the traces meanwhile.
      let view = await beat(300, 0);
      expect(view.complete).toBe(false);
      await expectSameAnswers(rollups, oracle, queries(10));
      await insert(h.store, Array.from({ length: 200 }, () => world.trace(now)));
      view = await beat(300, 0);
      await expectSameAnswers(rollups, oracle, queries(10));
      for (let i = 0; i < 20 && !view.complete; i++) view = await beat(300, 0);
      expect(view.complete).toBe(true);
      await expectSameAnswers(rollups, oracle, queries(15));

      // Steady traffic, late traces among it: read before and after the beat that takes it in.
      await insert(h.store, Array.from({ length: 500 }, () => world.trace(now)));
      await expectSameAnswers(rollups, oracle, queries(10));
      // A backlog larger than a chunk is taken in by one beat, a chunk per statement.
      expect((await beat(150)).traces).toBe(500);
      await expectSameAnswers(rollups, oracle, queries(20));
      const { rows } = await h.store.query<{ n: string }>(`SELECT count(*)::text AS n FROM usage_rollups`, []);
      expect(Number(rows[0].n)).toBeGreaterThan(0);
    }, 300_000);

    it('pages: each page after a cursor equals the raw reader page, and the pages make up the whole list', async () => {
      for (const q of queries(6, 1000)) {
        const whole = await oracle.series(q);
        const limit = 1 + Math.floor(world.random() * 6);
        let after: UsageQuery['after'] = null;
        const seen: UsageRow[] = [];
        for (let page = 0; page < 200; page++) {
          const pq: UsageQuery = { ...q, after, limit: limit + 1 };
          const got: UsageRow[] = await rollups.series(pq);
          const want: UsageRow[] = await oracle.series(pq);
          if (got.length !== want.length || got.some((r, i) => !same(r, want[i]))) expect([describeQuery(pq), got]).toEqual([describeQuery(pq), want]);
          seen.push(...got.slice(0, limit));
          if (got.length <= limit) break;
          const last: UsageRow = got[limit - 1];
          after = { bucketMs: last.bucket.getTime(), group: last.group };
        }
        expect(seen.map((r) => [r.bucket.toISOString(), r.group])).toEqual(whole.map((r) => [r.bucket.toISOString(), r.group]));
      }
    }, 300_000);

    it('retention prunes hour and day buckets past rollups_days; ranges before them are read from the traces', async () => {
      const cutoff = new Date(Date.now() - 10 * DAY);
      const pruned = await h.store.transaction((tx) => pruneRollups(tx, cutoff, 100_000, false));
      expect(pruned.find((p) => p.table === 'usage_rollups')?.rows).toBeGreaterThan(0);
      const kept = new UsageRollupRepository(h.store, configWith(10));
      const { rows } = await h.store.query<{ oldest: Date | string }>(`SELECT min(bucket + CASE step WHEN 'day' THEN interval '1 day' ELSE interval '1 hour' END) AS oldest FROM usage_rollups WHERE step <> 'minute'`, []);
      // Only buckets that ended by the cutoff went.
      expect(new Date(rows[0].oldest).getTime()).toBeGreaterThan(cutoff.getTime());
      await expectSameAnswers(kept, oracle, queries(20));
    }, 300_000);

    it('a rebuild (the state removed) takes every trace in again from empty', async () => {
      await h.store.query(`DELETE FROM rollup_state WHERE name = 'usage'`, []);
      await insert(h.store, Array.from({ length: 100 }, () => world.trace(now)));
      let view = await beat(1000, 0);
      for (let i = 0; i < 20 && !view.complete; i++) view = await beat(1000, 0);
      expect(view.complete).toBe(true);
      const { rows } = await h.store.query<{ rollups: string; traces: string }>(
        `SELECT (SELECT sum(requests) FROM usage_rollups WHERE step = 'day' AND dim = '')::text AS rollups, (SELECT count(*) FROM decision_traces)::text AS traces`,
        [],
      );
      expect(rows[0].rollups).toBe(rows[0].traces);
      await expectSameAnswers(rollups, oracle, queries(15));
    }, 300_000);
  });
}
