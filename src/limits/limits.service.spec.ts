import { closedPort, memoryLogger, SwitchableCache, SwitchableSql, UnusedSql } from '../../test/support/kit';
import { createTestPglite } from '../../test/support/pglite';
import { createTestDatabase, TestDatabase } from '../../test/support/postgres';
import { describeWithPostgres } from '../../test/support/real-servers';
import { GatewayError } from '../common/errors/gateway-error';
import type { Caller } from '../common/http/request-context';
import type { AppLogger } from '../common/logging/logger';
import { AppConfig } from '../config/app-config';
import { loadEnv } from '../config/env';
import { loadGatewayConfig } from '../config/gateway-config';
import { MetricsService } from '../metrics/metrics.service';
import { StoreFallback } from '../resilience/store-fallback';
import { CacheStore } from '../stores/cache/cache-store';
import { RedisCacheStore } from '../stores/cache/redis-cache.store';
import { PgSqlStore } from '../stores/sql/pg-sql.store';
import { SqlStore } from '../stores/sql/sql-store';
import { LimitsOptions, LimitsService } from './limits.service';
import { MonthlyUsageRepository } from './monthly-usage.repository';

/** 30 June 2025, 23:00:00 UTC: one hour before the month ends. */
const T0 = Date.UTC(2025, 5, 30, 23, 0, 0);
const JUNE = '2025-06-01';

const caller = (over: Partial<Caller> = {}): Caller => ({
  orgId: 'acme',
  keyId: 'acme-rw',
  plan: 'pro',
  features: [],
  permissions: ['read', 'write'],
  killSwitches: [],
  monthlyRequestLimit: null,
  ...over,
});

function makeConfig(perMinute: number): AppConfig {
  return new AppConfig(loadEnv({}), loadGatewayConfig(`limits: { requests_per_minute_per_key: ${perMinute} }\n`, {}));
}

/** The service as the module builds it, with the real store-fallback helper. */
function limitsService(cache: CacheStore, sql: SqlStore, metrics: MetricsService, logger: AppLogger, config: AppConfig, options?: LimitsOptions): LimitsService {
  return new LimitsService(cache, new MonthlyUsageRepository(sql), metrics, logger, new StoreFallback(metrics, logger), config, options);
}

async function rejection(p: Promise<unknown>): Promise<GatewayError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof GatewayError) return err;
    throw err;
  }
  throw new Error('expected a GatewayError, the call succeeded');
}

async function metric(metrics: MetricsService, name: string, labels: Record<string, string>): Promise<number | undefined> {
  const m = (await metrics.registry.getMetricsAsJSON()).find((x) => x.name === name);
  return (m?.values as Array<{ value: number; labels: Record<string, string> }> | undefined)?.find((v) =>
    Object.entries(labels).every(([k, val]) => v.labels[k] === val),
  )?.value;
}

interface Rig {
  svc: LimitsService;
  cache: SwitchableCache;
  sql: SwitchableSql;
  metrics: MetricsService;
  clock: { t: number };
  lines: Record<string, unknown>[];
  durable(orgId?: string, month?: string): Promise<number | null>;
}

/**
 * The monthly-limit behaviour that touches the analytics store, run on PGlite and on a real Postgres.
 */
function monthlySuite(name: string, makeSql: () => Promise<{ store: SqlStore; cleanup(): Promise<void> }>): void {
  describe(`LimitsService monthly limit on ${name}`, () => {
    const cleanups: Array<() => Promise<void>> = [];
    afterEach(async () => {
      for (const c of cleanups.splice(0).reverse()) await c();
    });

    async function rig(options: LimitsOptions = {}, cache?: CacheStore): Promise<Rig> {
      const { store, cleanup } = await makeSql();
      const sql = new SwitchableSql(store);
      const clock = { t: T0 };
      const c = (cache as SwitchableCache) ?? new SwitchableCache({ now: () => clock.t });
      const metrics = new MetricsService();
      const { logger, lines } = memoryLogger();
      const svc = limitsService(c, sql, metrics, logger, makeConfig(600), {
        now: () => clock.t,
        flushIntervalMs: 60_000,
        ...options,
      });
      cleanups.push(cleanup, () => c.close(), () => svc.beforeApplicationShutdown());
      const durable = async (orgId = 'acme', month = JUNE) => {
        const { rows } = await store.query<{ count: number }>('SELECT count FROM monthly_usage WHERE org_id = $1 AND month = $2::date', [orgId, month]);
        return rows.length ? Number(rows[0].count) : null;
      };
      return { svc, cache: c, sql, metrics, clock, lines, durable };
    }

    it('allows exactly the limit, then 429 MONTHLY_LIMIT_EXCEEDED with limit, used, reset_at and Retry-After', async () => {
      const { svc, metrics } = await rig();
      const c = caller({ monthlyRequestLimit: 3 });
      for (let i = 0; i < 3; i++) await svc.checkMonthly(c);
      const err = await rejection(svc.checkMonthly(c));
      expect(err.code).toBe('MONTHLY_LIMIT_EXCEEDED');
      expect(err.status).toBe(429);
      expect(err.toBody().error).toMatchObject({ code: 'MONTHLY_LIMIT_EXCEEDED', limit: 3, used: 3, reset_at: '2025-07-01T00:00:00.000Z' });
      expect(err.headers).toEqual({ 'Retry-After': '3600' });
      // Refused requests are not counted.
      expect((await rejection(svc.checkMonthly(c))).extra).toMatchObject({ used: 3 });
      // Another organisation has its own count.
      await svc.checkMonthly(caller({ orgId: 'other', monthlyRequestLimit: 3 }));
      expect(await metric(metrics, 'gateway_limiter_decisions_total', { limit: 'monthly', outcome: 'allowed' })).toBe(4);
      expect(await metric(metrics, 'gateway_limiter_decisions_total', { limit: 'monthly', outcome: 'denied' })).toBe(2);
    });

    it('starts again in the next UTC month, and rounds Retry-After up', async () => {
      const { svc, clock } = await rig();
      const c = caller({ monthlyRequestLimit: 1 });
      await svc.checkMonthly(c);
      clock.t = Date.UTC(2025, 6, 1) - 1_500;
      expect((await rejection(svc.checkMonthly(c))).headers).toEqual({ 'Retry-After': '2' });
      clock.t = Date.UTC(2025, 6, 1);
      await expect(svc.checkMonthly(c)).resolves.toBeUndefined();
      const err = await rejection(svc.checkMonthly(c));
      expect(err.extra).toEqual({ limit: 1, used: 1, reset_at: '2025-08-01T00:00:00.000Z' });
    });

    it('makes no store call for an unlimited organisation', async () => {
      const { svc, cache, sql } = await rig();
      for (let i = 0; i < 5; i++) await svc.checkMonthly(caller({ monthlyRequestLimit: null }));
      await svc.flush();
      expect([cache.calls, sql.queries]).toEqual([0, 0]);
    });

    it('writes the durable count in batches, never on the request', async () => {
      const { svc, sql, durable } = await rig();
      const c = caller({ monthlyRequestLimit: 100 });
      await svc.checkMonthly(c);
      const seeded = sql.queries;
      for (let i = 0; i < 9; i++) await svc.checkMonthly(c);
      // Only the first request (which created the counter) read the durable count; nothing was written yet.
      expect(sql.queries).toBe(seeded);
      expect(await durable()).toBeNull();
      await svc.flush();
      expect(sql.queries).toBe(seeded + 1);
      expect(await durable()).toBe(10);
      for (let i = 0; i < 5; i++) await svc.checkMonthly(c);
      await svc.checkMonthly(caller({ orgId: 'other', monthlyRequestLimit: 100 }));
      await svc.flush();
      expect(await durable()).toBe(15);
      expect(await durable('other')).toBe(1);
    });

    it('flushes on its own timer', async () => {
      const { svc, durable } = await rig({ flushIntervalMs: 20, now: Date.now });
      const c = caller({ monthlyRequestLimit: 100 });
      for (let i = 0; i < 3; i++) await svc.checkMonthly(c);
      const month = `${new Date().toISOString().slice(0, 7)}-01`;
      const deadline = Date.now() + 5_000;
      while ((await durable('acme', month)) !== 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(await durable('acme', month)).toBe(3);
    });

    it('seeds a missing counter from monthly_usage', async () => {
      const { svc, cache, durable, sql } = await rig();
      await sql.query('INSERT INTO monthly_usage (org_id, month, count) VALUES ($1, $2, $3)', ['acme', JUNE, 8]);
      const c = caller({ monthlyRequestLimit: 10 });
      await svc.checkMonthly(c);
      await svc.checkMonthly(c);
      const err = await rejection(svc.checkMonthly(c));
      expect(err.extra).toMatchObject({ limit: 10, used: 10 });
      expect(await cache.get('ml:{org:acme}:2025-06')).toBe('10');
      await svc.flush();
      expect(await durable()).toBe(10);

      // The cache loses the counter (a Redis restart): it is rebuilt from the durable count.
      await cache.del('ml:{org:acme}:2025-06');
      expect((await rejection(svc.checkMonthly(c))).extra).toMatchObject({ used: 10 });
      expect(await cache.get('ml:{org:acme}:2025-06')).toBe('10');
    });

    it('refuses the very first request when the durable count is already at the limit', async () => {
      const { svc, cache, sql } = await rig();
      await sql.query('INSERT INTO monthly_usage (org_id, month, count) VALUES ($1, $2, $3)', ['acme', JUNE, 5]);
      const err = await rejection(svc.checkMonthly(caller({ monthlyRequestLimit: 5 })));
      expect(err.extra).toMatchObject({ limit: 5, used: 5 });
      expect(await cache.get('ml:{org:acme}:2025-06')).toBe('5');
    });

    it('counts what it has not written yet when it reseeds', async () => {
      const { svc, cache } = await rig();
      const c = caller({ monthlyRequestLimit: 4 });
      for (let i = 0; i < 3; i++) await svc.checkMonthly(c);
      // Lost before the batch was written: the 3 pending requests still count.
      await cache.del('ml:{org:acme}:2025-06');
      await svc.checkMonthly(c);
      expect((await rejection(svc.checkMonthly(c))).extra).toMatchObject({ used: 4 });
    });

    it('enforces the limit through the analytics store while the cache is down, then rebuilds the counter from it', async () => {
      const { svc, cache, clock, durable, metrics, lines } = await rig();
      const c = caller({ monthlyRequestLimit: 6 });
      await svc.checkMonthly(c);
      await svc.checkMonthly(c);
      await svc.flush();
      expect(await durable()).toBe(2);

      cache.down = true;
      await svc.checkMonthly(c);
      await svc.checkMonthly(c);
      // Counted synchronously in the analytics store: it is the only shared count left.
      expect(await durable()).toBe(4);

      cache.down = false;
      clock.t += 1_000;
      // The cache still says 2; it is rebuilt from the durable 4 before counting the fifth.
      await svc.checkMonthly(c);
      await svc.checkMonthly(c);
      expect((await rejection(svc.checkMonthly(c))).extra).toMatchObject({ used: 6 });
      await svc.flush();
      expect(await durable()).toBe(6);
      expect(await metric(metrics, 'gateway_limiter_fallbacks_total', { limit: 'monthly', to: 'analytics' })).toBe(2);
      expect(lines.filter((l) => l.topic === 'cache-store:limits')).toHaveLength(1);
    });

    it('with the cache down, refuses at the limit in the analytics store, counting unwritten requests', async () => {
      const { svc, cache, durable } = await rig();
      const c = caller({ monthlyRequestLimit: 3 });
      await svc.checkMonthly(c);
      cache.down = true;
      await svc.checkMonthly(c);
      await svc.checkMonthly(c);
      // 1 pending (not yet written) + 2 in the table = 3.
      expect(await durable()).toBe(2);
      const err = await rejection(svc.checkMonthly(c));
      expect(err.extra).toMatchObject({ limit: 3, used: 3 });
      expect(await durable()).toBe(2);
    });

    it('keeps counts whose write failed and writes them once the analytics store is back', async () => {
      const { svc, sql, durable, clock } = await rig({ flushIntervalMs: 60_000 });
      const c = caller({ monthlyRequestLimit: 100 });
      for (let i = 0; i < 4; i++) await svc.checkMonthly(c);
      sql.down = true;
      await svc.flush();
      await svc.checkMonthly(c);
      sql.down = false;
      clock.t += 1_000;
      await svc.flush();
      expect(await durable()).toBe(5);
    });

    it('writes what it holds at shutdown', async () => {
      const { svc, durable } = await rig();
      for (let i = 0; i < 7; i++) await svc.checkMonthly(caller({ monthlyRequestLimit: 100 }));
      await svc.beforeApplicationShutdown();
      expect(await durable()).toBe(7);
    });

    it('with both stores down, still refuses per replica from the last count it saw', async () => {
      const { svc, cache, sql, lines } = await rig();
      const c = caller({ monthlyRequestLimit: 5 });
      for (let i = 0; i < 3; i++) await svc.checkMonthly(c);
      cache.down = true;
      sql.down = true;
      await svc.checkMonthly(c);
      await svc.checkMonthly(c);
      const err = await rejection(svc.checkMonthly(c));
      expect(err.extra).toMatchObject({ limit: 5, used: 5 });
      expect(lines.filter((l) => l.topic === 'analytics-store:monthly-limit')).toHaveLength(1);
    });
  });
}

monthlySuite('PGlite', async () => {
  const store = await createTestPglite();
  return { store, cleanup: () => store.close() };
});

describeWithPostgres('on a real Postgres', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(() => db?.drop());
  monthlySuite('Postgres', async () => {
    const store = new PgSqlStore(db.url);
    await store.query('DELETE FROM monthly_usage');
    return { store, cleanup: () => store.close() };
  });
});

describe('LimitsService per-key rate limit', () => {
  const opened: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of opened.splice(0)) await c();
  });

  function rig(perMinute: number, cache?: CacheStore) {
    const clock = { t: T0 };
    const c = cache ?? new SwitchableCache({ now: () => clock.t });
    const metrics = new MetricsService();
    const { logger, lines } = memoryLogger();
    const svc = limitsService(c, new SwitchableSql(new UnusedSql()), metrics, logger, makeConfig(perMinute), { now: () => clock.t });
    opened.push(() => svc.beforeApplicationShutdown(), () => c.close());
    return { svc, clock, metrics, lines, cache: c as SwitchableCache };
  }

  it('allows exactly N per minute per key and endpoint, then 429 rate_limited with Retry-After', async () => {
    const { svc, clock, metrics } = rig(5);
    const c = caller();
    for (let i = 0; i < 5; i++) {
      await svc.checkKeyRate(c, 'chat');
      clock.t += 100;
    }
    clock.t += 20_000;
    const err = await rejection(svc.checkKeyRate(c, 'chat'));
    expect(err.code).toBe('rate_limited');
    expect(err.status).toBe(429);
    // The first hit leaves the 60 s window 39.5 s from now: rounded up.
    expect(err.headers).toEqual({ 'Retry-After': '40' });
    // Other endpoints and other keys have their own windows.
    await svc.checkKeyRate(c, 'embeddings');
    await svc.checkKeyRate(caller({ keyId: 'acme-ro' }), 'chat');
    // The window slides: once the first hit is older than a minute, one more fits.
    clock.t += 39_500;
    await svc.checkKeyRate(c, 'chat');
    expect((await rejection(svc.checkKeyRate(c, 'chat'))).headers).toEqual({ 'Retry-After': '1' });
    expect(await metric(metrics, 'gateway_limiter_decisions_total', { limit: 'rate', endpoint: 'chat', outcome: 'allowed' })).toBe(7);
    expect(await metric(metrics, 'gateway_limiter_decisions_total', { limit: 'rate', endpoint: 'chat', outcome: 'denied' })).toBe(2);
  });

  it('takes a limit of 600 per minute', async () => {
    const { svc } = rig(600);
    const c = caller();
    for (let i = 0; i < 600; i++) await svc.checkKeyRate(c, 'feedback');
    expect((await rejection(svc.checkKeyRate(c, 'feedback'))).code).toBe('rate_limited');
  });

  it('is unlimited by default, without a store call', async () => {
    const clock = { t: T0 };
    const cache = new SwitchableCache({ now: () => clock.t });
    const { logger } = memoryLogger();
    const config = new AppConfig(loadEnv({}), loadGatewayConfig('', {}));
    expect(config.gateway.limits.requests_per_minute_per_key).toBeNull();
    const svc = limitsService(cache, new SwitchableSql(new UnusedSql()), new MetricsService(), logger, config, { now: () => clock.t });
    opened.push(() => svc.beforeApplicationShutdown(), () => cache.close());
    cache.down = true;
    for (let i = 0; i < 2_000; i++) await svc.checkKeyRate(caller(), 'chat');
    expect(cache.calls).toBe(0);
  });

  it('stays bounded per replica when the cache store is down, and logs the degradation once', async () => {
    const port = await closedPort();
    const redis = new RedisCacheStore({ url: `redis://127.0.0.1:${port}`, maxReconnectDelayMs: 50 });
    const { svc, clock, metrics, lines } = rig(5, redis);
    const c = caller();
    for (let i = 0; i < 5; i++) {
      await svc.checkKeyRate(c, 'chat');
      clock.t += 2_000;
    }
    const err = await rejection(svc.checkKeyRate(c, 'chat'));
    expect(err.code).toBe('rate_limited');
    expect(err.headers).toEqual({ 'Retry-After': '50' });
    expect(lines.filter((l) => l.topic === 'cache-store:limits')).toHaveLength(1);
    expect(await metric(metrics, 'gateway_limiter_fallbacks_total', { limit: 'rate', to: 'local' })).toBe(6);
    expect(await metric(metrics, 'gateway_store_errors_total', { store: 'cache' })).toBeGreaterThanOrEqual(1);
  });

  it('uses the shared store again once it is back', async () => {
    const { svc, clock, cache } = rig(3);
    const c = caller();
    cache.down = true;
    await svc.checkKeyRate(c, 'chat');
    cache.down = false;
    clock.t += 1_000;
    const before = cache.calls;
    await svc.checkKeyRate(c, 'chat');
    expect(cache.calls).toBe(before + 1);
  });
});

describe('LimitsService with a dead Redis and a live analytics store', () => {
  it('still enforces the monthly limit through Postgres and the rate limit locally', async () => {
    const port = await closedPort();
    const redis = new RedisCacheStore({ url: `redis://127.0.0.1:${port}`, maxReconnectDelayMs: 50 });
    const pglite = await createTestPglite();
    const { logger } = memoryLogger();
    const svc = limitsService(redis, pglite, new MetricsService(), logger, makeConfig(4), {});
    try {
      const c = caller({ monthlyRequestLimit: 3 });
      for (let i = 0; i < 3; i++) {
        await svc.checkKeyRate(c, 'chat');
        await svc.checkMonthly(c);
      }
      expect((await rejection(svc.checkMonthly(c))).extra).toMatchObject({ limit: 3, used: 3 });
      await svc.checkKeyRate(c, 'chat');
      expect((await rejection(svc.checkKeyRate(c, 'chat'))).code).toBe('rate_limited');
      const { rows } = await pglite.query<{ count: number }>('SELECT count FROM monthly_usage WHERE org_id = $1', ['acme']);
      expect(rows.map((r) => Number(r.count))).toEqual([3]);
    } finally {
      await svc.beforeApplicationShutdown();
      await redis.close();
      await pglite.close();
    }
  });
});
