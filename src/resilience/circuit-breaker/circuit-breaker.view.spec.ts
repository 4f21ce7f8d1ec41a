import { silentLogger } from '../../../test/support/kit';
import { AppConfig } from '../../config/app-config';
import { loadEnv } from '../../config/env';
import { loadGatewayConfig } from '../../config/gateway-config';
import { MetricsService } from '../../metrics/metrics.service';
import { BreakerDecision, BreakerOp, BreakerParams, CacheStore } from '../../stores/cache/cache-store';
import { MemoryCacheStore } from '../../stores/cache/memory-cache.store';
import { GuardedCacheStore } from '../guarded-stores';
import { StoreFallback } from '../store-fallback';
import { CircuitBreakerService } from './circuit-breaker.service';

/**
 * The breakers as routing sees them (BreakerView, docs/architecture.md "The routing chain", step 4): what this replica's own steps
 * saw, plus a beat that re-reads the shared state so breakers other replicas opened show too.
 * Two services on one in-process store stand for two replicas on one Redis (the Redis case runs
 * end to end in test/chat-breaker-routing.e2e-spec.ts).
 */
const T0 = 1_750_000_000_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const config = (providers: string[], refreshSeconds = 1): AppConfig =>
  new AppConfig(loadEnv({}), loadGatewayConfig(`providers:\n${providers.map((p) => `  ${p}: { family: mock }`).join('\n')}\nbreakers: { refresh_seconds: ${refreshSeconds} }\n`, {}));

/**
 * A store whose `state` reads can be held (a slow store) or made to fail (a dead one: its pings fail
 * too); `holdFailures` holds the answers of failure steps the same way. Other steps pass through.
 */
class ControlledStore extends MemoryCacheStore {
  stateCalls = 0;
  acquireCalls = 0;
  fail = false;
  private held: Array<() => void> = [];
  hold = false;
  holdFailures = false;

  override async ping(timeoutMs: number): Promise<void> {
    if (this.fail) throw new Error('connection refused');
    return super.ping(timeoutMs);
  }

  override async breaker(key: string, op: BreakerOp, params: BreakerParams, nowMs?: number, repeat?: number): Promise<BreakerDecision> {
    if (op === 'acquire') this.acquireCalls++;
    if (op === 'failure' && this.holdFailures) {
      const d = await super.breaker(key, op, params, nowMs, repeat);
      await new Promise<void>((resolve) => this.held.push(resolve));
      return d;
    }
    if (op !== 'state') return super.breaker(key, op, params, nowMs, repeat);
    this.stateCalls++;
    if (this.fail) throw new Error('connection refused');
    // Read now, answer later: a slow answer carries the state of when it was read.
    const d = await super.breaker(key, op, params, nowMs);
    if (this.hold) await new Promise<void>((resolve) => this.held.push(resolve));
    return d;
  }

  release(): void {
    for (const r of this.held.splice(0)) r();
  }
}

const closeables: Array<{ close(): Promise<void> } | { onModuleDestroy(): Promise<void> }> = [];
afterEach(async () => {
  for (const c of closeables.splice(0)) await ('close' in c ? c.close() : c.onModuleDestroy());
});

function replica(store: CacheStore, clock: { t: number }, cfg: AppConfig, metrics = new MetricsService()): CircuitBreakerService {
  const logger = silentLogger();
  const svc = new CircuitBreakerService(store, metrics, logger, new StoreFallback(metrics, logger), cfg, { now: () => clock.t, random: () => 0.5 });
  closeables.push(svc);
  return svc;
}

function rig(providers = ['alpha', 'beta']) {
  const clock = { t: T0 };
  const store = new ControlledStore({ now: () => clock.t });
  closeables.push(store);
  const cfg = config(providers);
  return { clock, store, cfg, a: replica(store, clock, cfg), b: replica(store, clock, cfg) };
}

const fail = async (svc: CircuitBreakerService, provider: string, n = 5) => {
  for (let i = 0; i < n; i++) await svc.record(provider, false, false);
};

describe('CircuitBreakerService as the breaker view', () => {
  it('follows its own steps: open for the open time (no jitter: 5 s), then null from half-open on', async () => {
    const { a, clock } = rig();
    expect(a.openForMs('alpha')).toBeNull();
    await fail(a, 'alpha', 4);
    expect(a.openForMs('alpha')).toBeNull();
    await fail(a, 'alpha', 1);
    expect(a.openForMs('alpha')).toBe(5_000);
    expect(a.openForMs('beta')).toBeNull();
    clock.t += 4_999;
    expect(a.openForMs('alpha')).toBe(1);
    clock.t += 1;
    expect(a.openForMs('alpha')).toBeNull();
    // The probe fails: open again, for twice as long.
    expect(await a.acquire('alpha')).toBe('probe');
    await a.record('alpha', false, true);
    expect(a.openForMs('alpha')).toBe(10_000);
    clock.t += 10_000;
    expect(await a.acquire('alpha')).toBe('probe');
    await a.record('alpha', true, true);
    expect(a.openForMs('alpha')).toBeNull();
  });

  it('shows a breaker another replica opened after one refresh, and its closing after the next', async () => {
    const { a, b, clock } = rig();
    await fail(a, 'alpha');
    expect(b.openForMs('alpha')).toBeNull();
    await b.refreshView();
    expect(b.openForMs('alpha')).toBe(5_000);
    clock.t += 5_000;
    expect(await a.acquire('alpha')).toBe('probe');
    await a.record('alpha', true, true);
    clock.t -= 1; // b's clock a little behind: only the refresh can tell it the breaker closed.
    expect(b.openForMs('alpha')).toBe(1);
    await b.refreshView();
    expect(b.openForMs('alpha')).toBeNull();
  });

  it('answers acquire from the view while it shows the breaker closed; an open or half-open one is asked for the probe lease', async () => {
    const { a, b, store, clock } = rig();
    for (let i = 0; i < 3; i++) expect(await b.acquire('alpha')).toBe('allow');
    expect(store.acquireCalls).toBe(0);
    // Another replica opens it: b lets requests through until it sees the opening, at its next refresh.
    await fail(a, 'alpha');
    expect(await b.acquire('alpha')).toBe('allow');
    expect(store.acquireCalls).toBe(0);
    await b.refreshView();
    expect(await b.acquire('alpha')).toBe('reject');
    expect(store.acquireCalls).toBe(1);
    // Half-open: both replicas ask, and only one gets the probe.
    clock.t += 5_000;
    expect(await b.acquire('alpha')).toBe('probe');
    expect(await a.acquire('alpha')).toBe('reject');
    expect(store.acquireCalls).toBe(3);
    await b.record('alpha', true, true);
    expect(await b.acquire('alpha')).toBe('allow');
    expect(store.acquireCalls).toBe(3);
    // a still saw it half-open: it asks once, sees it closed, and answers from its view after that.
    expect(await a.acquire('alpha')).toBe('allow');
    expect(await a.acquire('alpha')).toBe('allow');
    expect(store.acquireCalls).toBe(4);
  });

  it('a request after a failure report that opens the breaker waits for its answer and is rejected, never let through on the view before it', async () => {
    const { a, store } = rig();
    await fail(a, 'alpha', 4);
    store.holdFailures = true;
    // The fifth failure is stepped in the store (it opens the breaker there) but its answer is held.
    const fifth = a.record('alpha', false, false);
    let permit: string | undefined;
    const next = a.acquire('alpha').then((p) => (permit = p));
    await sleep(20);
    expect(permit).toBeUndefined();
    // Other providers are not held up by alpha's report.
    expect(await a.acquire('beta')).toBe('allow');
    store.release();
    await fifth;
    await next;
    expect(permit).toBe('reject');
    expect(a.openForMs('alpha')).toBe(5_000);
    // A failure that does not open it holds the next request only until its answer, then lets it through.
    const answered = a.record('beta', false, false);
    let betaPermit: string | undefined;
    const allowed = a.acquire('beta').then((p) => (betaPermit = p));
    await sleep(20);
    expect(betaPermit).toBeUndefined();
    store.release();
    await answered;
    await allowed;
    expect(betaPermit).toBe('allow');
    expect(store.acquireCalls).toBe(1);
  });

  it('reads only: refreshes neither take the probe lease nor count toward opening', async () => {
    const { a, b, clock } = rig();
    await fail(a, 'alpha', 4);
    for (let i = 0; i < 5; i++) await b.refreshView();
    expect(await a.acquire('alpha')).toBe('allow');
    await fail(a, 'beta');
    clock.t += 5_000;
    for (let i = 0; i < 5; i++) await b.refreshView();
    expect(b.openForMs('beta')).toBeNull();
    expect(await a.acquire('beta')).toBe('probe');
    // The fifth failure of alpha still opens it: the window was left as it was.
    await fail(a, 'alpha', 1);
    expect(a.openForMs('alpha')).toBe(5_000);
  });

  it('a slow read started before a step does not undo what the step saw', async () => {
    const { a, b, store } = rig();
    store.hold = true;
    const refresh = b.refreshView();
    // Both providers read (closed) and held; meanwhile b's own steps open alpha, and a opens beta.
    await new Promise((r) => setImmediate(r));
    expect(store.stateCalls).toBe(2);
    await fail(b, 'alpha');
    await fail(a, 'beta');
    store.release();
    await refresh;
    expect(b.openForMs('alpha')).toBe(5_000);
    // beta was read before a opened it: the next refresh shows it.
    expect(b.openForMs('beta')).toBeNull();
    store.hold = false;
    await b.refreshView();
    expect(b.openForMs('beta')).toBe(5_000);
  });

  it('keeps the view as last seen when the store fails, never rejects, and leaves the store alone until the store breaker sees it answer', async () => {
    const { a, store, clock, cfg } = rig();
    // Replica b reaches the store through the store breaker, as it reaches Redis in production.
    const guarded = new GuardedCacheStore(store, { settings: { probe_interval_ms: 10, probe_timeout_ms: 200 } });
    closeables.push({ close: async () => guarded.guard.close() });
    const b = replica(guarded, clock, cfg);
    await fail(a, 'alpha');
    await b.refreshView();
    store.fail = true;
    await expect(b.refreshView()).resolves.toBeUndefined();
    expect(b.openForMs('alpha')).toBe(5_000);
    const calls = store.stateCalls;
    await sleep(50);
    await b.refreshView();
    expect(store.stateCalls).toBe(calls);
    store.fail = false;
    const deadline = Date.now() + 2_000;
    while (!guarded.guard.available && Date.now() < deadline) await sleep(5);
    await b.refreshView();
    // Tried again: one read per provider.
    expect(store.stateCalls).toBe(calls + 2);
  });

  it('refreshes on the configured beat once the application is up, one read at a time on a slow store, and stops on module destroy', async () => {
    const clock = { t: T0 };
    const store = new ControlledStore({ now: () => clock.t });
    closeables.push(store);
    const cfg = config(['alpha'], 0.05);
    const a = replica(store, clock, cfg);
    const b = replica(store, clock, cfg);
    b.onApplicationBootstrap();
    await fail(a, 'alpha');
    const deadline = Date.now() + 2_000;
    while (b.openForMs('alpha') === null && Date.now() < deadline) await sleep(10);
    expect(b.openForMs('alpha')).toBe(5_000);

    // A store that does not answer: beats are skipped while the read is out, and the view stays.
    store.hold = true;
    await sleep(100);
    const calls = store.stateCalls;
    await sleep(200);
    expect(store.stateCalls).toBe(calls);
    expect(b.openForMs('alpha')).toBe(5_000);
    store.hold = false;
    store.release();

    await b.onModuleDestroy();
    const after = store.stateCalls;
    await sleep(200);
    expect(store.stateCalls).toBe(after);
  });
});
