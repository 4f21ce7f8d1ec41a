import { CacheStore } from '../stores/cache/cache-store';
import { MemoryCacheStore } from '../stores/cache/memory-cache.store';
import { StoreFallback } from './store-fallback';
import { StoreUnavailableError } from './store-guard';

export interface SharedOrLocalOptions {
  /** Keys the per-replica store holds at most (least recently written evicted). */
  maxEntries: number;
  /** Clock of the per-replica store (tests move it). */
  now?: () => number;
}

/**
 * "The shared store, else a per-replica one" (docs/operations.md "Store outages"): state every
 * replica must agree on (rate windows, monthly counters, circuit breakers) lives in the cache store;
 * when a call to it fails, the caller answers from a bounded in-process memory store with the same
 * semantics, so a limit stays a limit and a breaker stays a breaker on this replica.
 *
 * A failed call is counted and logged through StoreFallback. A call the store breaker refused (the
 * store already known to be down, docs/operations.md "The store breaker") costs no wait and is not
 * counted or logged again: that outage was reported by the call that found it, and the guard's
 * probe, not a timer here, decides when the shared store is tried again.
 */
export class SharedOrLocalCache {
  /** The per-replica store: the fallback's only home, so every feature degrades to the same semantics. */
  readonly local: MemoryCacheStore;

  constructor(
    readonly shared: CacheStore,
    private readonly fallback: StoreFallback,
    options: SharedOrLocalOptions,
  ) {
    this.local = new MemoryCacheStore({ now: options.now, maxEntries: options.maxEntries });
  }

  /** `call` on the shared store; undefined when it failed (counted and logged under `topic`, with `context`) or was refused. */
  async tryShared<T extends {} | null>(call: (store: CacheStore) => Promise<T>, topic: string, context?: Record<string, unknown>): Promise<T | undefined> {
    try {
      return await call(this.shared);
    } catch (err) {
      if (!(err instanceof StoreUnavailableError)) this.fallback.failed('cache', topic, err, context);
      return undefined;
    }
  }

  /** Closes the per-replica store; later calls to it reject. */
  close(): Promise<void> {
    return this.local.close();
  }
}
