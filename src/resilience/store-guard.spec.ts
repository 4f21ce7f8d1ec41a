import { StoreTimeoutError } from '../stores/with-timeout';
import { StoreGuard, StoreUnavailableError } from './store-guard';

const outage = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' });
const answered = Object.assign(new Error('duplicate key value violates unique constraint'), { code: '23505' });
const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

function rig(probeIntervalMs = 20) {
  const state = { up: true, pings: 0, changes: [] as boolean[] };
  const guard = new StoreGuard({
    store: 'cache',
    probeIntervalMs,
    probeTimeoutMs: 50,
    isOutage: (err) => (err as { code?: string }).code === 'ECONNREFUSED',
    ping: async () => {
      state.pings++;
      if (!state.up) throw outage;
    },
    onChange: (available) => state.changes.push(available),
  });
  return { guard, state };
}

describe('StoreGuard', () => {
  const guards: StoreGuard[] = [];
  afterEach(() => guards.splice(0).forEach((g) => g.close()));

  it('lets calls through while the store answers, errors of the store itself included', async () => {
    const { guard, state } = rig();
    guards.push(guard);
    await expect(guard.run(async () => 42)).resolves.toBe(42);
    await expect(guard.run(() => Promise.reject(answered))).rejects.toBe(answered);
    expect(guard.available).toBe(true);
    expect(state.pings).toBe(0);
  });

  it('after an outage error refuses every call at once, without calling the store, until a probe succeeds', async () => {
    const { guard, state } = rig();
    guards.push(guard);
    state.up = false;
    await expect(guard.run(() => Promise.reject(outage))).rejects.toBe(outage);
    expect(guard.available).toBe(false);
    let called = 0;
    const refused = await guard.run(async () => ++called).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(StoreUnavailableError);
    expect(String(refused)).toMatch(/the cache store is unavailable/);
    expect(called).toBe(0);
    await wait(100);
    expect(state.pings).toBeGreaterThanOrEqual(2);
    expect(guard.available).toBe(false);
    state.up = true;
    await wait(60);
    expect(guard.available).toBe(true);
    await expect(guard.run(async () => ++called)).resolves.toBe(1);
    expect(state.changes).toEqual([false, true]);
    // Probing stopped once the store answered.
    const pings = state.pings;
    await wait(60);
    expect(state.pings).toBe(pings);
  });

  it('probes at once after marking the store unavailable, so a stall of its own costs one round trip', async () => {
    const { guard, state } = rig(10_000);
    guards.push(guard);
    await expect(guard.run(() => new Promise(() => undefined), 20)).rejects.toBeInstanceOf(StoreTimeoutError);
    expect(guard.available).toBe(false);
    await wait(30);
    expect([state.pings, guard.available]).toEqual([1, true]);
  });

  it('treats a call past its deadline as an outage', async () => {
    const { guard } = rig(10_000);
    guards.push(guard);
    const err = await guard.run(() => new Promise(() => undefined), 30).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreTimeoutError);
    expect(guard.available).toBe(false);
  });

  it('stops probing when closed', async () => {
    const { guard, state } = rig();
    state.up = false;
    guard.markUnavailable(outage);
    guard.close();
    await wait(80);
    expect(state.pings).toBe(0);
  });
});
