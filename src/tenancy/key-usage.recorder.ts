import { BeforeApplicationShutdown, Injectable, OnApplicationBootstrap, Optional } from '@nestjs/common';
import { Periodic } from '../common/lifecycle/periodic';
import { stripUndefined } from '../common/options';
import { StoreFallback } from '../resilience/store-fallback';
import { withTimeout } from '../stores/with-timeout';
import { TenancyRepository } from './tenancy.repository';

export class KeyUsageOptions {
  /** How often the keys seen are written (default 60 s): "last used" is at most this far behind. */
  flushIntervalMs?: number;
  /** Keys held between flushes; a key seen beyond it waits for the next request after a flush. */
  maxKeys?: number;
  /** How long shutdown may spend on the last flush. */
  shutdownTimeoutMs?: number;
  now?: () => number;
}

const DEFAULTS = { flushIntervalMs: 60_000, maxKeys: 100_000, shutdownTimeoutMs: 2_000 };

/**
 * A key's "last used" time (`api_keys.last_used_at`, docs/api.md "Admin API", keys) without a store
 * write per request (docs/architecture.md "Decision traces off the hot path"): each authenticated
 * request only notes its key and the time in memory; every `flushIntervalMs` one statement moves
 * the times of every key seen forward (never back, so replicas agree in any order). A failed flush
 * keeps the times for the next one (counted and logged by StoreFallback), and shutdown flushes what
 * is left within a bound. So the figure is coarse: at most one interval behind, per replica.
 */
@Injectable()
export class KeyUsageRecorder implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly o: typeof DEFAULTS & { now: () => number };
  private seen = new Map<string, number>();
  private readonly periodic = new Periodic(() => this.flush());

  constructor(
    private readonly repo: TenancyRepository,
    private readonly fallback: StoreFallback,
    @Optional() options?: KeyUsageOptions,
  ) {
    this.o = { ...DEFAULTS, now: Date.now, ...stripUndefined(options) };
  }

  /** Notes that the key authenticated now. O(1), no I/O. */
  touch(keyId: string): void {
    if (this.seen.size >= this.o.maxKeys && !this.seen.has(keyId)) return;
    this.seen.set(keyId, this.o.now());
  }

  onApplicationBootstrap(): void {
    this.periodic.start(this.o.flushIntervalMs);
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.periodic.stop();
    await withTimeout(this.run(), this.o.shutdownTimeoutMs, 'last-used flush at shutdown').catch(() => undefined);
  }

  /** Writes what was noted since the last flush; never rejects. */
  run(): Promise<void> {
    return this.periodic.run();
  }

  private async flush(): Promise<void> {
    if (this.seen.size === 0) return;
    const batch = this.seen;
    this.seen = new Map();
    const ids = [...batch.keys()];
    try {
      await this.repo.touchLastUsed(ids, ids.map((id) => new Date(batch.get(id)!)));
    } catch (err) {
      this.fallback.failed('analytics', 'analytics-store:key-last-used', err, { effect: 'written at the next flush' });
      // Put the batch back under what was noted meanwhile (the later time wins).
      for (const [id, at] of batch) {
        const later = this.seen.get(id);
        if (later === undefined && this.seen.size >= this.o.maxKeys) continue;
        this.seen.set(id, Math.max(at, later ?? at));
      }
    }
  }
}
