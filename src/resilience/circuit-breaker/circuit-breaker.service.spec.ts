import { randomUUID } from 'node:crypto';
import { closedPort, memoryLogger, SwitchableCache } from '../../../test/support/kit';
import { describeWithRedis, TEST_REDIS_URL } from '../../../test/support/real-servers';
import type { AppLogger } from '../../common/logging/logger';
import { AppConfig } from '../../config/app-config';
import { loadEnv } from '../../config/env';
import { loadGatewayConfig } from '../../config/gateway-config';
import { MetricsService } from '../../metrics/metrics.service';
import { CacheStore } from '../../stores/cache/cache-store';
import { MemoryCacheStore } from '../../stores/cache/memory-cache.store';
import { RedisCacheStore } from '../../stores/cache/redis-cache.store';
import { GuardedCacheStore } from '../guarded-stores';
import { StoreFallback } from '../store-fallback';
import { CircuitBreakerOptions, CircuitBreakerService } from './circuit-breaker.service';

const T0 = 1_750_000_000_000;

function makeConfig(providers: string[]): AppConfig {
  const yaml = `providers:\n${providers.map((p) => `  ${p}: { family: mock }`).join('\n')}\n`;
  return new AppConfig(loadEnv({}), loadGatewayConfig(yaml, {}));
}

/** The store breaker as production wires it around Redis, probing every 10 ms (docs/operations.md "The store breaker"). */
const guarded = (store: CacheStore) => new GuardedCacheStore(store, { settings: { probe_interval_ms: 10, probe_timeout_ms: 200 } });

/** A breaker service on `store` with the real store-fallback helper. */
function breakers(store: CacheStore, metrics: MetricsService, logger: AppLogger, config: AppConfig, options?: CircuitBreakerOptions) {
  return new CircuitBreakerService(store, metrics, logger, new StoreFallback(metrics, logger), config, options);
}

interface Rig {
  svc: CircuitBreakerService;
  store: CacheStore;
  metrics: MetricsService;
  clock: { t: number };
  lines: Record<string, unknown>[];
}

const opened: Array<{ close(): Promise<void> } | { onModuleDestroy(): Promise<void> }> = [];
afterEach(async () => {
  for (const o of opened.splice(0)) await ('close' in o ? o.close() : o.onModuleDestroy());
});

/** A breaker service on an in-process store with one fake clock for both (the shared and the local breaker). */
function rig(options: CircuitBreakerOptions = {}, providers = ['alpha', 'beta'], store?: CacheStore): Rig {
  const clock = { t: T0 };
  const s = store ?? new MemoryCacheStore({ now: () => clock.t });
  const metrics = new MetricsService();
  const { logger, lines } = memoryLogger();
  const svc = breakers(s, metrics, logger, makeConfig(providers), { random: () => 0.5, now: () => clock.t, ...options });
  opened.push(s, svc);
  return { svc, store: s, metrics, clock, lines };
}

async function metric(metrics: MetricsService, name: string, labels: Record<string, string>): Promise<number | undefined> {
  const m = (await metrics.registry.getMetricsAsJSON()).find((x) => x.name === name);
  return (m?.values as Array<{ value: number; labels: Record<string, string> }> | undefined)?.find((v) =>
    Object.entries(labels).every(([k, val]) => v.labels[k] === val),
  )?.value;
}

async function fail(svc: CircuitBreakerService, provider: string, n: number): Promise<void> {
  for (let i = 0; i < n; i++) await svc.record(provider, false, false);
}

describe('CircuitBreakerService on the in-process store', () => {
  it('opens after 5 consecutive failures, for that provider only, and counts the opening', async () => {
    const { svc, metrics } = rig();
    await fail(svc, 'alpha', 4);
    expect(await svc.acquire('alpha')).toBe('allow');
    await svc.record('alpha', true, false);
    await fail(svc, 'alpha', 4);
    expect(await svc.acquire('alpha')).toBe('allow');
    await fail(svc, 'alpha', 1);
    expect(await svc.acquire('alpha')).toBe('reject');
    expect(await svc.acquire('beta')).toBe('allow');
    const states = await svc.states();
    expect(states).toEqual({
      alpha: { state: 'open', openUntil: new Date(T0 + 5_000).toISOString(), consecutiveFailures: 5 },
      beta: { state: 'closed', consecutiveFailures: 0 },
    });
    expect(await metric(metrics, 'gateway_circuit_breaker_openings_total', { provider: 'alpha' })).toBe(1);
    expect(await metric(metrics, 'gateway_circuit_breaker_state', { provider: 'alpha' })).toBe(2);
    expect(await metric(metrics, 'gateway_circuit_breaker_state', { provider: 'beta' })).toBe(0);
  });

  it('steps the successes of a moment as one call that counts each, in order with the reports around them', async () => {
    const clock = { t: T0 };
    const cache = new SwitchableCache({ now: () => clock.t });
    const svc = breakers(cache, new MetricsService(), memoryLogger().logger, makeConfig(['alpha', 'beta']), { now: () => clock.t, random: () => 0.5, successBatchMs: 60_000 });
    opened.push(cache, svc);
    // 40 successes reported at once: one call, still waiting while nothing else is reported.
    const reported = Array.from({ length: 40 }, (_, i) => svc.record(i % 4 === 0 ? 'beta' : 'alpha', true, false));
    await new Promise((r) => setTimeout(r, 20));
    expect(cache.callsOf.breaker).toBe(0);
    // Four failures, then a success and four more: were the success stepped after the failures, the
    // ninth report would be the fifth failure in a row and open the breaker.
    await fail(svc, 'alpha', 4);
    // alpha's 30 successes went first, as one call; beta's wait.
    expect(cache.callsOf.breaker).toBe(1 + 4);
    const success = svc.record('alpha', true, false);
    await fail(svc, 'alpha', 4);
    await success;
    expect(cache.callsOf.breaker).toBe(1 + 4 + 1 + 4);
    // A read steps what waits first (beta's 10, one call; that each is counted is the stores' contract).
    const calls = cache.callsOf.breaker;
    expect(await svc.states()).toEqual({ alpha: { state: 'closed', consecutiveFailures: 4 }, beta: { state: 'closed', consecutiveFailures: 0 } });
    expect(cache.callsOf.breaker - calls).toBe(1 + 2);
    await Promise.all(reported);
  });

  it('opens when half of 20 requests in the last 10 s failed, and forgets requests older than that', async () => {
    const { svc, clock } = rig();
    // 10 failures among 19 requests, never 5 in a row, spread over 9.5 s.
    for (let i = 0; i < 19; i++) {
      await svc.record('alpha', i % 2 === 1, false);
      clock.t += 500;
    }
    expect(await svc.acquire('alpha')).toBe('allow');
    await svc.record('alpha', true, false);
    expect(await svc.acquire('alpha')).toBe('reject');

    // The same pattern with a pause longer than the window in the middle never opens.
    const { svc: other, clock: c2 } = rig();
    for (let i = 0; i < 10; i++) await other.record('alpha', i % 2 === 1, false);
    c2.t += 11_000;
    for (let i = 0; i < 10; i++) await other.record('alpha', i % 2 === 1, false);
    expect(await other.acquire('alpha')).toBe('allow');
    expect((await other.states()).alpha.state).toBe('closed');
  });

  it('keeps a breaker open for 5 s × 2^(openings−1), capped at 60 s, within ±20 % jitter', async () => {
    const draws = [0, 0.999999, 0.3, 0.7, 0, 0.999999];
    let next = 0;
    const { svc, clock } = rig({ random: () => draws[next++ % draws.length] });
    await fail(svc, 'alpha', 5);
    const nominal = [5_000, 10_000, 20_000, 40_000, 60_000, 60_000];
    for (const [i, ms] of nominal.entries()) {
      const s = (await svc.states()).alpha;
      const openMs = Date.parse(s.openUntil!) - clock.t;
      expect([i, openMs >= Math.floor(ms * 0.8) && openMs <= ms * 1.2]).toEqual([i, true]);
      // Still open one millisecond before the end, half-open at it.
      clock.t += openMs - 1;
      expect(await svc.acquire('alpha')).toBe('reject');
      clock.t += 1;
      expect(await svc.acquire('alpha')).toBe('probe');
      await svc.record('alpha', false, true);
    }
    // The extreme draws land on the bounds (to the millisecond, after flooring).
    for (const [draw, ms] of [
      [0, 4_000],
      [0.999999, 5_999],
    ]) {
      const fresh = rig({ random: () => draw });
      await fail(fresh.svc, 'alpha', 5);
      expect(Date.parse((await fresh.svc.states()).alpha.openUntil!) - fresh.clock.t).toBe(ms);
    }
  });

  it('gives exactly one probe to 50 concurrent acquires when half-open; a success closes and resets the growth', async () => {
    const { svc, clock, metrics } = rig();
    await fail(svc, 'alpha', 5);
    clock.t += 5_000;
    const permits = await Promise.all(Array.from({ length: 50 }, () => svc.acquire('alpha')));
    expect(permits.filter((p) => p === 'probe')).toHaveLength(1);
    expect(permits.filter((p) => p === 'reject')).toHaveLength(49);
    expect((await svc.states()).alpha.state).toBe('half_open');
    expect(await metric(metrics, 'gateway_circuit_breaker_state', { provider: 'alpha' })).toBe(1);

    await svc.record('alpha', true, true);
    expect(await svc.states()).toMatchObject({ alpha: { state: 'closed', consecutiveFailures: 0 } });
    expect(await svc.acquire('alpha')).toBe('allow');
    expect(await metric(metrics, 'gateway_circuit_breaker_state', { provider: 'alpha' })).toBe(0);
    // Openings were reset: the next opening is 5 s again, not 10 s.
    await fail(svc, 'alpha', 5);
    expect(Date.parse((await svc.states()).alpha.openUntil!) - clock.t).toBe(5_000);
    expect(await metric(metrics, 'gateway_circuit_breaker_openings_total', { provider: 'alpha' })).toBe(2);
  });

  it('a failed probe re-opens for longer; a probe that never reports frees its lease after the lease time', async () => {
    const { svc, clock } = rig({ probeLeaseMs: 2_000 });
    await fail(svc, 'alpha', 5);
    clock.t += 5_000;
    expect(await svc.acquire('alpha')).toBe('probe');
    await svc.record('alpha', false, true);
    const s = (await svc.states()).alpha;
    expect(s.state).toBe('open');
    expect(Date.parse(s.openUntil!) - clock.t).toBe(10_000);

    clock.t += 10_000;
    expect(await svc.acquire('alpha')).toBe('probe');
    clock.t += 1_999;
    expect(await svc.acquire('alpha')).toBe('reject');
    clock.t += 1;
    expect(await svc.acquire('alpha')).toBe('probe');
  });

  it('logs each opening once, by the replica that caused it', async () => {
    const { svc, lines } = rig();
    await fail(svc, 'alpha', 7);
    const openings = lines.filter((l) => l.msg === 'circuit breaker opened');
    expect(openings).toHaveLength(1);
    expect(openings[0]).toMatchObject({ provider: 'alpha', openings: 1, open_until: new Date(T0 + 5_000).toISOString() });
  });
});

/** A store whose every call fails, as a dead cache store's would. */
class FailingStore extends MemoryCacheStore {
  calls = 0;
  override async breaker(): Promise<never> {
    this.calls++;
    throw new Error('cache store down');
  }
}

describe('CircuitBreakerService when the cache store fails', () => {
  it('falls back to a local breaker that still opens and half-opens, never throws, and logs once per interval', async () => {
    const port = await closedPort();
    const store = guarded(new RedisCacheStore({ url: `redis://127.0.0.1:${port}`, maxReconnectDelayMs: 50 }));
    const { svc, clock, metrics, lines } = rig({}, ['alpha'], store);
    expect(await svc.acquire('alpha')).toBe('allow');
    await fail(svc, 'alpha', 5);
    expect(await svc.acquire('alpha')).toBe('reject');
    expect(await svc.states()).toEqual({ alpha: { state: 'open', openUntil: new Date(T0 + 5_000).toISOString(), consecutiveFailures: 5 } });
    clock.t += 5_000;
    expect(await svc.acquire('alpha')).toBe('probe');
    expect(await svc.acquire('alpha')).toBe('reject');
    await svc.record('alpha', true, true);
    expect(await svc.acquire('alpha')).toBe('allow');

    const degraded = lines.filter((l) => l.topic === 'cache-store:circuit-breaker');
    expect(degraded).toHaveLength(1);
    expect(degraded[0]).toMatchObject({ msg: 'degraded', fallback: 'local breaker' });
    // The store was tried once: the store breaker refused every later step at once (its probes never
    // got an answer), and every step was answered locally: all but the two acquires on a breaker
    // closed in the view (the first and the last), which ask no store.
    expect(await metric(metrics, 'gateway_store_errors_total', { store: 'cache' })).toBe(1);
    expect(await metric(metrics, 'gateway_circuit_breaker_local_fallbacks_total', { provider: 'alpha' })).toBe(10);
  });

  it('after a failure answers locally without calling the store until the store breaker sees it answer, then uses it again', async () => {
    const clock = { t: T0 };
    const cache = new SwitchableCache({ now: () => clock.t });
    const store = guarded(cache);
    const metrics = new MetricsService();
    const svc = breakers(store, metrics, memoryLogger().logger, makeConfig(['alpha']), { now: () => clock.t });
    opened.push(store, svc);
    cache.down = true;
    await svc.record('alpha', true, false);
    expect(cache.callsOf.breaker).toBe(1);
    for (let i = 0; i < 20; i++) await svc.record('alpha', true, false);
    expect(cache.callsOf.breaker).toBe(1);
    cache.down = false;
    const deadline = Date.now() + 2_000;
    while (!store.guard.available && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    await svc.record('alpha', true, false);
    expect(cache.callsOf.breaker).toBe(2);
  });

  it('lets requests through when no breaker can answer at all', async () => {
    const { svc } = rig({}, ['alpha'], new FailingStore());
    // Closing the local fallback makes it throw too.
    await svc.onModuleDestroy();
    await expect(svc.acquire('alpha')).resolves.toBe('allow');
    await expect(svc.record('alpha', false, false)).resolves.toBeUndefined();
    await expect(svc.states()).resolves.toEqual({ alpha: { state: 'closed', consecutiveFailures: 0 } });
  });
});

describeWithRedis('CircuitBreakerService on a shared Redis', () => {
  it('replicas share one breaker: failures seen by replica A open it for replica B, and B holds the only probe', async () => {
    const provider = `p${randomUUID().slice(0, 8)}`;
    const replica = () => {
      const store = new RedisCacheStore({ url: TEST_REDIS_URL!, commandTimeoutMs: 2_000 });
      const svc = breakers(store, new MetricsService(), memoryLogger().logger, makeConfig([provider]), {
        baseOpenMs: 300,
        maxOpenMs: 1_000,
        jitter: 0,
      });
      opened.push(store, svc);
      return svc;
    };
    const a = replica();
    const b = replica();
    await fail(a, provider, 3);
    await fail(b, provider, 1);
    expect(await b.acquire(provider)).toBe('allow');
    await fail(a, provider, 1);
    // B sees the opening at its next refresh (or its own next report), and answers from its view.
    await b.refreshView();
    expect(await b.acquire(provider)).toBe('reject');
    expect((await b.states())[provider]).toMatchObject({ state: 'open', consecutiveFailures: 5 });

    await new Promise((r) => setTimeout(r, 350));
    const permits = await Promise.all([...Array.from({ length: 10 }, () => a.acquire(provider)), ...Array.from({ length: 10 }, () => b.acquire(provider))]);
    expect(permits.filter((p) => p === 'probe')).toHaveLength(1);
    // Whoever holds the probe reports success through its own replica; the other replica sees it closed.
    const holder = permits.indexOf('probe') < 10 ? a : b;
    const other = holder === a ? b : a;
    await holder.record(provider, true, true);
    expect(await other.acquire(provider)).toBe('allow');
    expect((await other.states())[provider]).toEqual({ state: 'closed', consecutiveFailures: 0 });
  });
});
