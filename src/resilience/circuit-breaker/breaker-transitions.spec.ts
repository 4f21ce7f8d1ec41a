import { SwitchableCache, silentLogger } from '../../../test/support/kit';
import { MetricsService } from '../../metrics/metrics.service';
import { SharedOrLocalCache } from '../shared-or-local-cache';
import { StoreFallback } from '../store-fallback';
import { BreakerTransitions, transitionsKey } from './breaker-transitions';

describe('BreakerTransitions', () => {
  let clock: number;
  const make = (shared: SwitchableCache, capacity = 3, sharedPerProvider = 2) => {
    const logger = silentLogger();
    const metrics = new MetricsService();
    const store = new SharedOrLocalCache(shared, new StoreFallback(metrics, logger), { maxEntries: 100 });
    return new BreakerTransitions(store, { capacity, sharedPerProvider, sharedTtlMs: 60_000, now: () => clock });
  };
  const opened = { provider: 'p', to: 'open' as const, from: 'closed' as const, cause: { error: 'status', status: 503 }, openUntil: null, openings: 1 };
  const settle = () => new Promise<void>((r) => setImmediate(r));
  beforeEach(() => {
    clock = Date.UTC(2025, 0, 1);
  });

  it('newest first; the ring keeps `capacity` in all, the cache store `sharedPerProvider` per provider', async () => {
    const shared = new SwitchableCache();
    const log = make(shared);
    for (let i = 1; i <= 4; i++) {
      clock += 1000;
      log.note({ ...opened, openings: i });
      await settle();
    }
    const stored = JSON.parse((await shared.get(transitionsKey('p')))!);
    expect(stored.map((t: any) => t.openings)).toEqual([4, 3]);
    // Shared 4, 3 merged with the ring's 2, 3, 4 (1 fell out of it).
    expect((await log.recent('p', 10)).map((t) => t.openings)).toEqual([4, 3, 2]);
    expect((await log.recent('p', 2)).map((t) => t.openings)).toEqual([4, 3]);
    expect(await log.recent('q', 10)).toEqual([]);
  });

  it('another replica on the same cache store reads them; with the store down, each reads its own ring', async () => {
    const shared = new SwitchableCache();
    const a = make(shared, 10, 10);
    const b = make(shared, 10, 10);
    a.note(opened);
    await settle();
    clock += 1000;
    b.note({ ...opened, to: 'half_open', from: 'open', cause: null });
    await settle();
    expect((await a.recent('p', 10)).map((t) => [t.to, t.replica])).toEqual([
      ['half_open', b.replica],
      ['open', a.replica],
    ]);
    shared.down = true;
    expect((await b.recent('p', 10)).map((t) => t.replica)).toEqual([b.replica]);
  });

  it('a stored value that is not a list of transitions reads as none', async () => {
    const shared = new SwitchableCache();
    const log = make(shared);
    await shared.set(transitionsKey('p'), '{"not":"a list"}', 60_000);
    expect(await log.recent('p', 10)).toEqual([]);
    await shared.set(transitionsKey('p'), 'not json', 60_000);
    expect(await log.recent('p', 10)).toEqual([]);
  });
});
