import { createCacheStore } from '../../src/stores/cache/cache-store.factory';
import { MemoryCacheStore } from '../../src/stores/cache/memory-cache.store';
import { cacheStoreContract } from './cache-store.contract';

const makeClock = (start = 1_750_000_000_000) => {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
};

cacheStoreContract('memory', () => {
  const clock = makeClock();
  const store = new MemoryCacheStore({ now: clock.now });
  return {
    store,
    // One process holds the data: every "replica" is the same store.
    peer: () => store,
    advance: async (ms) => void clock.advance(ms),
    exactTime: true,
    dispose: () => store.close(),
  };
});

describe('MemoryCacheStore', () => {
  it('sweeps expired entries of every kind, and leaves live ones', async () => {
    const clock = makeClock();
    const store = new MemoryCacheStore({ now: clock.now });
    await store.set('a', '1', 100);
    await store.hitWindows([{ key: 'w', limit: 5, windowMs: 100 }]);
    await store.incrementBelow('c', 5, 100);
    await store.set('live', '1', 10_000);
    expect(store.size).toBe(4);
    clock.advance(101);
    store.sweep();
    expect(store.size).toBe(1);
    expect(await store.get('live')).toBe('1');
    await store.close();
  });

  it('sweeps on an unref()ed timer, so nobody has to read an expired key for it to go', async () => {
    const clock = makeClock();
    const store = new MemoryCacheStore({ now: clock.now, sweepIntervalMs: 10 });
    await store.set('a', '1', 100);
    expect((store as unknown as { sweeper: NodeJS.Timeout }).sweeper.hasRef()).toBe(false);
    clock.advance(200);
    await new Promise((r) => setTimeout(r, 50));
    expect(store.size).toBe(0);
    await store.close();
  });

  it('caps the number of entries, evicting the least recently written first', async () => {
    const store = new MemoryCacheStore({ maxEntries: 3 });
    await store.set('k1', '1', 60_000);
    await store.set('k2', '2', 60_000);
    await store.set('k3', '3', 60_000);
    await store.set('k1', '1b', 60_000);
    await store.set('k4', '4', 60_000);
    expect(store.size).toBe(3);
    expect(await store.get('k2')).toBeNull();
    expect(await store.get('k1')).toBe('1b');
    expect(await store.get('k3')).toBe('3');
    expect(await store.get('k4')).toBe('4');
    for (let i = 0; i < 1_000; i++) await store.hitWindows([{ key: `w${i}`, limit: 1, windowMs: 60_000 }]);
    expect(store.size).toBe(3);
    await store.close();
  });

  it('makes room by dropping expired entries before live ones', async () => {
    const clock = makeClock();
    const store = new MemoryCacheStore({ now: clock.now, maxEntries: 3 });
    await store.set('old', '1', 10);
    await store.set('live1', '1', 60_000);
    await store.set('live2', '2', 60_000);
    clock.advance(2_000);
    await store.set('new', '3', 60_000);
    expect(await store.get('live1')).toBe('1');
    expect(await store.get('live2')).toBe('2');
    expect(await store.get('new')).toBe('3');
    await store.close();
  });

  it('keeps a sliding log ordered when the clock steps back', async () => {
    const clock = makeClock();
    const store = new MemoryCacheStore({ now: clock.now });
    const checks = [{ key: 'w', limit: 2, windowMs: 1_000 }];
    clock.advance(500);
    await store.hitWindows(checks);
    clock.advance(-400);
    await store.hitWindows(checks);
    // The hit made at the earlier time is the oldest, so it is the one that frees a slot first.
    expect((await store.hitWindows(checks)).retryAfterMs).toBe(1_000);
    clock.advance(1_001);
    expect(await store.hitWindows(checks)).toMatchObject({ allowed: true, counts: [2] });
    await store.close();
  });
});

describe('createCacheStore', () => {
  it('gives the in-process store when no REDIS_URL is configured', async () => {
    const store = createCacheStore({ redisUrl: undefined });
    expect(store).toBeInstanceOf(MemoryCacheStore);
    expect(store.kind).toBe('memory');
    await store.close();
  });
});
