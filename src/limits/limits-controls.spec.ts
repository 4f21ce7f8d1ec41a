import { randomUUID } from 'node:crypto';
import { makeCaller, makeConfig, memoryLogger, rejectedWith, SwitchableCache, SwitchableSql, UnusedSql } from '../../test/support/kit';
import { createTestPglite } from '../../test/support/pglite';
import { createTestDatabase, TestDatabase } from '../../test/support/postgres';
import { describeWithPostgres, describeWithRedis, TEST_REDIS_URL } from '../../test/support/real-servers';
import { GatewayError } from '../common/errors/gateway-error';
import type { Caller } from '../common/http/request-context';
import type { OrgLimits } from '../config/gateway-config.schema';
import { MetricsService } from '../metrics/metrics.service';
import { StoreFallback } from '../resilience/store-fallback';
import { CacheStore } from '../stores/cache/cache-store';
import { RedisCacheStore } from '../stores/cache/redis-cache.store';
import { PgSqlStore } from '../stores/sql/pg-sql.store';
import { SqlStore } from '../stores/sql/sql-store';
import { LimitsService, SpendAsk } from './limits.service';
import { MonthlySpendRepository } from './monthly-spend.repository';
import { MonthlyUsageRepository } from './monthly-usage.repository';

/** 30 June 2025, 23:00:00 UTC: one hour before the month ends. */
const T0 = Date.UTC(2025, 5, 30, 23, 0, 0);
const JUNE = '2025-06-01';

const YAML = `
providers: { mock: { family: mock }, alt: { family: mock } }
models:
  priced: { provider: mock, cost: { input_per_mtok: 1, output_per_mtok: 4 } }
  dear: { provider: alt, cost: { input_per_mtok: 10, output_per_mtok: 40 } }
  free: { provider: mock }
  both: { providers: { mock: {}, alt: {} } }
routes:
  - { name: fast, models: [auto], targets: [mock/priced] }
`;

/** A caller of a fresh organisation (so runs on a shared Redis never meet) with these controls. */
const callerWith = (key?: OrgLimits, org?: OrgLimits, over: Partial<Caller> = {}): Caller =>
  makeCaller({ orgId: `org-${randomUUID()}`, keyId: 'k1', limits: { key, org }, ...over });
const ask = (tokens: number, microUsd: number) => (): SpendAsk => ({ tokens, microUsd });
const used = (status: number, promptTokens: number | null, completionTokens: number | null, costUsd: number | null) => ({ status, promptTokens, completionTokens, costUsd });

const rejection = (p: Promise<unknown>): Promise<GatewayError> => rejectedWith(p, GatewayError);

interface Rig {
  svc: LimitsService;
  cache: CacheStore;
  sql: SwitchableSql;
  clock: { t: number };
  spendRow(orgId: string, keyId: string): Promise<number | null>;
}

/** The controls on one pair of stores: the in-process cache (a fake clock) and PGlite, or Redis and Postgres. */
function controlsSuite(name: string, stores: () => Promise<{ cache: CacheStore; sql: SqlStore; exactTime: boolean; cleanup(): Promise<void> }>): void {
  describe(`LimitsService controls on ${name}`, () => {
    const cleanups: Array<() => Promise<void>> = [];
    afterEach(async () => {
      for (const c of cleanups.splice(0).reverse()) await c();
    });
    let exactTime = false;

    async function rig(): Promise<Rig> {
      const s = await stores();
      exactTime = s.exactTime;
      const sql = new SwitchableSql(s.sql);
      const clock = { t: exactTime ? T0 : Date.now() };
      const metrics = new MetricsService();
      const { logger } = memoryLogger();
      const svc = new LimitsService(
        s.cache,
        new MonthlyUsageRepository(sql),
        metrics,
        logger,
        new StoreFallback(metrics, logger),
        makeConfig(YAML),
        { now: () => (exactTime ? clock.t : Date.now()), flushIntervalMs: 60_000 },
        new MonthlySpendRepository(sql),
      );
      cleanups.push(s.cleanup, () => svc.beforeApplicationShutdown());
      const spendRow = async (orgId: string, keyId: string) => {
        const month = exactTime ? JUNE : `${new Date().toISOString().slice(0, 7)}-01`;
        const { rows } = await s.sql.query<{ micro_usd: string }>('SELECT micro_usd FROM monthly_spend WHERE org_id = $1 AND key_id = $2 AND month = $3::date', [orgId, keyId, month]);
        return rows.length ? Number(rows[0].micro_usd) : null;
      };
      return { svc, cache: s.cache, sql, clock, spendRow };
    }

    it('costs nothing without controls: no store call, and the estimate is never made', async () => {
      const { svc, sql } = await rig();
      let asked = 0;
      const c = makeCaller();
      for (const endpoint of ['chat', 'embeddings', 'feedback'] as const) {
        expect(await svc.admit(c, endpoint, () => (asked++, { tokens: 1, microUsd: 1 }))).toBeUndefined();
      }
      // A key whose only control is an allow-list has no window or counter either.
      expect(await svc.admit(callerWith({ models: ['priced'] }), 'chat', ask(1, 1))).toBeUndefined();
      expect(asked).toBe(0);
      expect(sql.queries).toBe(0);
    });

    it('requests_per_minute of a key and of its organisation: exactly the limit, then 429 naming which; a refused request spends neither', async () => {
      const { svc } = await rig();
      const a = callerWith({ requests_per_minute: 3 }, { requests_per_minute: 5 });
      const b = { ...a, keyId: 'k2', limits: { key: { requests_per_minute: 3 }, org: a.limits!.org } };
      for (let i = 0; i < 3; i++) await svc.admit(a, 'chat');
      const keyFull = await rejection(svc.admit(a, 'feedback'));
      expect([keyFull.code, keyFull.status, keyFull.message]).toEqual(['rate_limited', 429, 'Rate limit exceeded: 3 requests per minute for this API key.']);
      expect(Number(keyFull.headers!['Retry-After'])).toBeGreaterThanOrEqual(1);
      // The refused requests of key a spent nothing of the organisation's window: key b gets its 2.
      await svc.admit(b, 'embeddings');
      await svc.admit(b, 'chat');
      const orgFull = await rejection(svc.admit(b, 'chat'));
      expect(orgFull.message).toBe('Rate limit exceeded: 5 requests per minute for the organisation.');
    });

    it('tokens_per_minute: the estimate is charged up front and settled to what the answer used', async () => {
      const { svc } = await rig();
      const c = callerWith({ tokens_per_minute: 100 });
      const first = await svc.admit(c, 'chat', ask(40, 0));
      await svc.admit(c, 'chat', ask(40, 0));
      const full = await rejection(svc.admit(c, 'chat', ask(40, 0)));
      expect([full.code, full.message]).toEqual(['rate_limited', 'Token rate limit exceeded: 100 tokens per minute for this API key.']);
      // The first answer used 8 + 2 tokens: 30 are given back.
      svc.settle(c, first, used(200, 8, 2, null));
      await eventually(() => svc.admit(c, 'chat', ask(40, 0)));
      expect((await rejection(svc.admit(c, 'chat', ask(40, 0)))).code).toBe('rate_limited');
      // Feedback spends no tokens: it is not refused by a full tokens window, and costs no store call.
      expect(await svc.admit(c, 'feedback')).toBeUndefined();
    });

    it('charges an estimate over the whole tokens limit at the limit, so the request fits an empty window', async () => {
      const { svc } = await rig();
      const c = callerWith(undefined, { tokens_per_minute: 100 });
      const big = await svc.admit(c, 'embeddings', ask(500, 0));
      const err = await rejection(svc.admit(c, 'embeddings', ask(1, 0)));
      expect(err.message).toBe('Token rate limit exceeded: 100 tokens per minute for the organisation.');
      // Settled to what it used (over the limit): the window refuses until it slides.
      svc.settle(c, big, used(200, 30, 0, null));
      await eventually(() => svc.admit(c, 'embeddings', ask(70, 0)));
    });

    it('a failed request that used nothing gives its estimate back; an answer without usage keeps it', async () => {
      const { svc } = await rig();
      const c = callerWith({ tokens_per_minute: 100 });
      const failed = await svc.admit(c, 'chat', ask(60, 0));
      svc.settle(c, failed, used(502, null, null, null));
      const noUsage = await svc.admit(c, 'chat', ask(60, 0));
      svc.settle(c, noUsage, used(200, null, null, null));
      expect((await rejection(svc.admit(c, 'chat', ask(60, 0)))).code).toBe('rate_limited');
      await svc.admit(c, 'chat', ask(40, 0));
    });

    it('monthly_budget_usd: exactly N requests of a budget worth N of them, under 1,000 at once; then 429 budget_exceeded', async () => {
      const { svc, clock } = await rig();
      const c = callerWith({ monthly_budget_usd: 0.0041 });
      const results = await Promise.allSettled(Array.from({ length: 1_000 }, () => svc.admit(c, 'chat', ask(11, 41))));
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(100);
      const err = await rejection(svc.admit(c, 'chat', ask(11, 41)));
      expect([err.code, err.status]).toEqual(['budget_exceeded', 429]);
      expect(err.message).toBe('The monthly spend budget of 0.0041 USD for this API key is exhausted.');
      const resetAt = exactTime ? '2025-07-01T00:00:00.000Z' : new Date(Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth() + 1, 1)).toISOString();
      expect(err.toBody().error).toMatchObject({ code: 'budget_exceeded', limit: 0.0041, used: 0.0041, reset_at: resetAt });
      if (exactTime) expect(err.headers).toEqual({ 'Retry-After': String((Date.UTC(2025, 6, 1) - clock.t) / 1000) });
    });

    it('a budget counts the catalogue cost the answers settled to, and writes every request\'s spend to monthly_spend', async () => {
      const { svc, spendRow } = await rig();
      const c = callerWith(undefined, { monthly_budget_usd: 0.0001 });
      const a = await svc.admit(c, 'chat', ask(0, 60));
      expect((await rejection(svc.admit(c, 'chat', ask(0, 60)))).extra).toMatchObject({ limit: 0.0001, used: 0.00006 });
      // It cost 10 micro-USD: 50 come back.
      svc.settle(c, a, used(200, 5, 1, 0.00001));
      await eventually(() => svc.admit(c, 'chat', ask(0, 60)));
      // A key without any budget has its spend written too, so a budget set mid-month counts the month.
      const plain = makeCaller({ orgId: c.orgId, keyId: 'k9' });
      svc.settle(plain, undefined, used(200, 3, 3, 0.000007));
      await svc.flush();
      expect(await spendRow(c.orgId, '')).toBe(17);
      expect(await spendRow(c.orgId, 'k1')).toBe(10);
      expect(await spendRow(c.orgId, 'k9')).toBe(7);
    });

    it('seeds a budget counter from monthly_spend, once', async () => {
      const { svc, sql } = await rig();
      const c = callerWith({ monthly_budget_usd: 0.005 });
      const month = exactTime ? JUNE : `${new Date().toISOString().slice(0, 7)}-01`;
      await sql.query('INSERT INTO monthly_spend (org_id, key_id, month, micro_usd) VALUES ($1, $2, $3, $4)', [c.orgId, 'k1', month, 4_000]);
      const before = sql.queries;
      await svc.admit(c, 'chat', ask(0, 600));
      expect(sql.queries).toBe(before + 1);
      expect((await rejection(svc.admit(c, 'chat', ask(0, 600)))).extra).toMatchObject({ used: 0.0046 });
      expect(sql.queries).toBe(before + 1);
    });

    it('requests_per_minute 100: exactly 100 of 1,000 requests at once', async () => {
      const { svc } = await rig();
      const c = callerWith({ requests_per_minute: 100 });
      const results = await Promise.allSettled(Array.from({ length: 1_000 }, (_, i) => svc.admit(c, i % 2 ? 'chat' : 'embeddings', ask(5, 5))));
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(100);
      for (const r of results) if (r.status === 'rejected') expect((r.reason as GatewayError).code).toBe('rate_limited');
    });

    it('checks every window and counter of a request in one store call', async () => {
      const { svc, cache } = await rig();
      if (!(cache instanceof SwitchableCache)) return;
      const c = callerWith({ requests_per_minute: 10, tokens_per_minute: 1_000, monthly_budget_usd: 1 }, { requests_per_minute: 50, tokens_per_minute: 5_000, monthly_budget_usd: 5 }, { monthlyRequestLimit: 100 });
      // The first request also seeds its three counters of the month (one more call); the next ones make one.
      await svc.admit(c, 'chat', ask(10, 10), true);
      const before = cache.calls;
      await svc.admit(c, 'chat', ask(10, 10), true);
      await svc.admit(c, 'embeddings', ask(10, 10));
      expect(cache.calls).toBe(before + 2);
      expect(cache.callsOf.spend).toBe(4);
    });
  });
}

describe('LimitsService controls without the cache store', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  async function rig() {
    const clock = { t: T0 };
    const cache = new SwitchableCache({ now: () => clock.t });
    const pglite = await createTestPglite();
    const sql = new SwitchableSql(pglite);
    const metrics = new MetricsService();
    const { logger, lines } = memoryLogger();
    const svc = new LimitsService(cache, new MonthlyUsageRepository(sql), metrics, logger, new StoreFallback(metrics, logger), makeConfig(YAML), { now: () => clock.t, flushIntervalMs: 60_000 }, new MonthlySpendRepository(sql));
    cleanups.push(async () => (await cache.close(), await pglite.close()), () => svc.beforeApplicationShutdown());
    const spendRow = async (orgId: string, keyId: string) => {
      const { rows } = await pglite.query<{ micro_usd: string }>('SELECT micro_usd FROM monthly_spend WHERE org_id = $1 AND key_id = $2 AND month = $3::date', [orgId, keyId, JUNE]);
      return rows.length ? Number(rows[0].micro_usd) : null;
    };
    return { svc, cache, sql, clock, lines, metrics, spendRow };
  }

  it('Redis down: the windows hold per replica (never unlimited), the budget is checked and spent in Postgres', async () => {
    const { svc, cache, spendRow, lines } = await rig();
    const c = callerWith({ requests_per_minute: 3, tokens_per_minute: 1_000, monthly_budget_usd: 0.0001 });
    cache.down = true;
    const a = await svc.admit(c, 'chat', ask(10, 40));
    // Spent synchronously in the analytics store: it is the only shared count left.
    expect(await spendRow(c.orgId, 'k1')).toBe(40);
    await svc.admit(c, 'chat', ask(10, 40));
    const broke = await rejection(svc.admit(c, 'chat', ask(10, 40)));
    expect(broke.extra).toMatchObject({ limit: 0.0001, used: 0.00008 });
    await svc.admit(c, 'chat', ask(10, 20));
    expect(await spendRow(c.orgId, 'k1')).toBe(100);
    // The fourth request: the per-replica window of 3 refuses it.
    expect((await rejection(svc.admit(c, 'chat', ask(1, 0)))).message).toBe('Rate limit exceeded: 3 requests per minute for this API key.');
    // The first answer cost 10: the 30 it was charged too much come off in the next batch.
    svc.settle(c, a, used(200, 5, 5, 0.00001));
    await svc.flush();
    expect(await spendRow(c.orgId, 'k1')).toBe(70);
    expect(lines.filter((l) => l.topic === 'cache-store:limits')).toHaveLength(1);
  });

  it('rebuilds a budget counter from Postgres once Redis is back', async () => {
    const { svc, cache, clock } = await rig();
    const c = callerWith({ monthly_budget_usd: 0.0001 });
    svc.settle(c, await svc.admit(c, 'chat', ask(0, 30)), used(200, 1, 1, 0.00003));
    cache.down = true;
    await svc.admit(c, 'chat', ask(0, 30));
    cache.down = false;
    clock.t += 1_000;
    // The cache says 30; Postgres holds the 30 spent there, and this replica 30 not yet written: 60,
    // before counting 30 more.
    await svc.admit(c, 'chat', ask(0, 30));
    expect((await rejection(svc.admit(c, 'chat', ask(0, 30)))).extra).toMatchObject({ used: 0.00009 });
  });

  it('with both stores down, a budget is still bounded per replica from the last value seen', async () => {
    const { svc, cache, sql } = await rig();
    const c = callerWith(undefined, { monthly_budget_usd: 0.0001 });
    await svc.admit(c, 'embeddings', ask(0, 50));
    cache.down = true;
    sql.down = true;
    await svc.admit(c, 'embeddings', ask(0, 30));
    const err = await rejection(svc.admit(c, 'embeddings', ask(0, 30)));
    expect([err.code, err.extra]).toEqual(['budget_exceeded', expect.objectContaining({ used: 0.00008 })]);
  });

  it('a request refused by its budget without the cache gives back the monthly request it had counted', async () => {
    const { svc, cache } = await rig();
    const c = callerWith({ monthly_budget_usd: 0.00005 }, undefined, { monthlyRequestLimit: 2 });
    cache.down = true;
    await svc.admit(c, 'chat', ask(0, 50), true);
    expect((await rejection(svc.admit(c, 'chat', ask(0, 1), true))).code).toBe('budget_exceeded');
    // The refused request's monthly count was taken back: one more request fits the limit of 2.
    await svc.admit(c, 'chat', ask(0, 0), true);
    expect((await rejection(svc.admit(c, 'chat', ask(0, 0), true))).code).toBe('MONTHLY_LIMIT_EXCEEDED');
  });
});

describe('LimitsService model allow-lists', () => {
  const metrics = new MetricsService();
  const { logger } = memoryLogger();
  const svc = new LimitsService(new SwitchableCache(), new MonthlyUsageRepository(new UnusedSql()), metrics, logger, new StoreFallback(metrics, logger), makeConfig(YAML));
  afterAll(() => svc.beforeApplicationShutdown());
  const refused = (c: Caller, model: unknown) => {
    try {
      svc.checkModel(c, { model });
    } catch (err) {
      expect(err).toBeInstanceOf(GatewayError);
      return (err as GatewayError).toBody().error;
    }
    return undefined;
  };

  it('lets every name through without a list, and a body without a string model to validation', () => {
    expect(refused(makeCaller(), 'anything,at/all')).toBeUndefined();
    expect(refused(callerWith({ models: ['priced'] }), 42)).toBeUndefined();
    expect(() => svc.checkModel(callerWith({ models: ['priced'] }), 'not an object')).not.toThrow();
  });

  it('needs every entry of a comma list on the list, aliases and provider/model pairs included', () => {
    const c = callerWith({ models: ['priced', 'auto', 'alt/dear'] });
    for (const ok of ['priced', 'auto', 'mock/priced', 'alt/dear', 'priced, auto', 'auto,alt/dear']) expect([ok, refused(c, ok)]).toEqual([ok, undefined]);
    // A pair names one provider: it does not allow the bare model, nor the model from another provider.
    expect(refused(c, 'dear')).toEqual({ type: 'error', code: 'model_not_allowed', message: 'This API key may not use the model "dear".', param: 'model' });
    expect(refused(c, 'priced,free')).toMatchObject({ code: 'model_not_allowed', message: 'This API key may not use the model "free".' });
    expect(refused(c, 'mock/free')).toMatchObject({ code: 'model_not_allowed' });
    expect(refused(c, 'nonexistent')).toMatchObject({ code: 'model_not_allowed' });
  });

  it('needs a name on both the key\'s and the organisation\'s lists', () => {
    const c = callerWith({ models: ['priced', 'free'] }, { models: ['free', 'both'] });
    expect(refused(c, 'free')).toBeUndefined();
    expect(refused(c, 'priced')).toMatchObject({ code: 'model_not_allowed' });
    expect(refused(c, 'both')).toMatchObject({ code: 'model_not_allowed' });
    expect(svc.mayUse(c, 'free')).toBe(true);
    expect(svc.mayUse(c, 'both')).toBe(false);
  });
});

/** Retries a call the settle above makes room for (a settle is fire-and-forget: on Redis it lands a round trip later). */
async function eventually<T>(fn: () => Promise<T>, ms = 2_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}

controlsSuite('memory and PGlite', async () => {
  const clock = { t: T0 };
  const cache = new SwitchableCache({ now: () => clock.t });
  const sql = await createTestPglite();
  return { cache, sql, exactTime: true, cleanup: async () => (await cache.close(), await sql.close()) };
});

describeWithRedis('with real servers', () => {
  describeWithPostgres('Redis and Postgres', () => {
    let db: TestDatabase;
    beforeAll(async () => {
      db = await createTestDatabase();
    });
    afterAll(() => db?.drop());
    controlsSuite('Redis and Postgres', async () => {
      const cache = new RedisCacheStore({ url: TEST_REDIS_URL!, commandTimeoutMs: 2_000 });
      const sql = new PgSqlStore(db.url);
      return { cache, sql, exactTime: false, cleanup: async () => (await cache.close(), await sql.close()) };
    });
  });
});
