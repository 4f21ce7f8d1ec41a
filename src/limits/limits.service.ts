import { BeforeApplicationShutdown, Injectable, Optional } from '@nestjs/common';
import type { Logger } from 'pino';
import { Counter } from 'prom-client';
import { GatewayError } from '../common/errors/gateway-error';
import type { Caller } from '../common/http/request-context';
import { AppLogger } from '../common/logging/logger';
import { ThrottledWarning } from '../common/logging/throttled-warning';
import { stripUndefined } from '../common/options';
import { AppConfig } from '../config/app-config';
import { MetricsService } from '../metrics/metrics.service';
import { CacheStore, WindowCheck } from '../stores/cache/cache-store';
import { MemoryCacheStore } from '../stores/cache/memory-cache.store';
import { withTimeout } from '../stores/with-timeout';
import { MonthlyUsageRepository, UsageDelta } from './monthly-usage.repository';
import { setBounded } from '../common/bounded-map';

export type RateLimitedEndpoint = 'chat' | 'embeddings' | 'feedback';

export class LimitsOptions {
  /** Milliseconds since the epoch (tests move it across a month end). */
  now?: () => number;
  /** How often counted requests are added to `monthly_usage`. */
  flushIntervalMs?: number;
  /** Upper bound of the read that seeds a missing monthly counter (the only analytics read on the hot path). */
  seedTimeoutMs?: number;
  /** After a cache-store failure, limits are answered without it this long, so an outage costs one timeout, not one per request. */
  storeRetryMs?: number;
  /** Degradation log interval. */
  logIntervalMs?: number;
  /** Keys held by the per-replica fallback limiter. */
  localMaxKeys?: number;
}

const DEFAULTS = {
  flushIntervalMs: 1_000,
  seedTimeoutMs: 1_000,
  storeRetryMs: 1_000,
  logIntervalMs: 30_000,
  localMaxKeys: 10_000,
};

const RATE_WINDOW_MS = 60_000;
/** Monthly counters outlive their month a little, so a replica with a late clock still finds them. */
const MONTH_KEY_GRACE_MS = 86_400_000;
const MAX_FLUSH_BACKOFF_MS = 30_000;

interface Month {
  /** First day, as `monthly_usage.month` holds it. */
  day: string;
  /** 'YYYY-MM', for cache keys. */
  label: string;
  /** First instant of the next UTC month (`reset_at`, docs/api.md "Decisions the contract leaves open"). */
  resetAt: number;
}

function monthOf(now: number): Month {
  const d = new Date(now);
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth();
  const label = `${String(y).padStart(4, '0')}-${String(m + 1).padStart(2, '0')}`;
  return { day: `${label}-01`, label, resetAt: Date.UTC(y, m + 1, 1) };
}

interface MonthlyDecision {
  allowed: boolean;
  used: number;
}

/** Keys of one call share a hash tag (docs/architecture.md "Stateless replicas"): the key's id for rate limits, the organisation's for months. */
const rateKey = (keyId: string, endpoint: RateLimitedEndpoint): string => `rl:{key:${keyId}}:${endpoint}`;
const monthKey = (orgId: string, month: Month): string => `ml:{org:${orgId}}:${month.label}`;
const usageKey = (orgId: string, day: string): string => `${orgId}\u0000${day}`;

/**
 * Per-key rate limits and per-organisation monthly limits (docs/architecture.md "One limiter for every limit").
 *
 * Both are decided in the cache store, atomically, so replicas share them. Monthly counts also go
 * to `monthly_usage`, added in batches off the hot path; that durable count seeds a counter the
 * cache lost. When the cache store fails the rate limit is enforced per replica by an
 * in-process limiter (bounded, never unlimited) and the monthly limit by the analytics store; with
 * both stores down, the monthly limit is enforced per replica from the last count this replica saw.
 * Every degradation is counted in metrics and logged at most once per interval.
 */
@Injectable()
export class LimitsService implements BeforeApplicationShutdown {
  private readonly o: typeof DEFAULTS;
  private readonly now: () => number;
  private readonly local: MemoryCacheStore;
  private readonly log: Logger;
  private readonly warning: ThrottledWarning;
  private readonly decisions: Counter<'limit' | 'endpoint' | 'outcome'>;
  private readonly fallbacks: Counter<'limit' | 'to'>;
  private readonly timer: NodeJS.Timeout;
  private sharedRetryAt = 0;

  /** Monthly counts not yet in `monthly_usage`, per (org, month); `inFlight` is the batch being written. */
  private pending = new Map<string, UsageDelta>();
  private inFlight = new Map<string, UsageDelta>();
  private flushing: Promise<void> | undefined;
  private flushFailures = 0;
  private nextFlushAt = 0;
  /** Monthly counters this replica counted in the analytics store while the cache was down: rebuilt from it when the cache is back. */
  private readonly reseed = new Set<string>();
  /** Monthly counters this replica counted in process while both stores were down. */
  private readonly localMonthly = new Set<string>();
  /** The last monthly count seen per counter: where the in-process count starts when both stores are down. */
  private readonly lastUsed = new Map<string, number>();

  constructor(
    private readonly cache: CacheStore,
    private readonly usage: MonthlyUsageRepository,
    private readonly metrics: MetricsService,
    logger: AppLogger,
    private readonly config: AppConfig,
    @Optional() options?: LimitsOptions,
  ) {
    const given = stripUndefined(options);
    this.o = { ...DEFAULTS, ...given } as typeof DEFAULTS;
    this.now = given.now ?? Date.now;
    this.local = new MemoryCacheStore({ now: this.now, maxEntries: this.o.localMaxKeys });
    this.log = logger.pino;
    this.warning = new ThrottledWarning(logger.pino, this.o.logIntervalMs);
    this.decisions = new Counter({
      name: 'gateway_limiter_decisions_total',
      help: 'Rate and monthly limit decisions by limit, endpoint and outcome',
      labelNames: ['limit', 'endpoint', 'outcome'] as const,
      registers: [metrics.registry],
    });
    this.fallbacks = new Counter({
      name: 'gateway_limiter_fallbacks_total',
      help: 'Limit checks answered without the cache store (to: local = per replica, analytics = Postgres)',
      labelNames: ['limit', 'to'] as const,
      registers: [metrics.registry],
    });
    this.timer = setInterval(() => {
      if (this.now() >= this.nextFlushAt) void this.flush();
    }, this.o.flushIntervalMs);
    this.timer.unref();
  }

  /**
   * Per-key rate limit (config `limits.requests_per_minute_per_key`, sliding window) for endpoint
   * 'chat' | 'embeddings' | 'feedback'; null (the default) = unlimited, and no store call. Throws
   * GatewayError('rate_limited', …, { headers: { 'Retry-After': '<seconds, ceil, ≥1>' } }).
   */
  async checkKeyRate(caller: Caller, endpoint: RateLimitedEndpoint): Promise<void> {
    const limit = this.config.gateway.limits.requests_per_minute_per_key;
    if (limit === null) return;
    const checks: WindowCheck[] = [{ key: rateKey(caller.keyId, endpoint), limit, windowMs: RATE_WINDOW_MS }];
    let d = await this.shared('rate', () => this.cache.hitWindows(checks));
    if (!d) {
      this.fallbacks.inc({ limit: 'rate', to: 'local' });
      d = await this.local.hitWindows(checks);
    }
    this.decisions.inc({ limit: 'rate', endpoint, outcome: d.allowed ? 'allowed' : 'denied' });
    if (d.allowed) return;
    throw new GatewayError('rate_limited', `Rate limit exceeded: ${limit} requests per minute for this API key.`, {
      headers: { 'Retry-After': String(Math.max(1, Math.ceil(d.retryAfterMs / 1000))) },
    });
  }

  /** Monthly request limit of the caller's organisation (chat only); `monthlyRequestLimit === null` = unlimited (no store call). Throws GatewayError('MONTHLY_LIMIT_EXCEEDED') with `limit`, `used`, `reset_at` and Retry-After. */
  async checkMonthly(caller: Caller): Promise<void> {
    const limit = caller.monthlyRequestLimit;
    if (limit === null) return;
    const now = this.now();
    const month = monthOf(now);
    const d = await this.countMonthly(caller.orgId, month, limit, month.resetAt - now + MONTH_KEY_GRACE_MS);
    this.decisions.inc({ limit: 'monthly', endpoint: 'chat', outcome: d.allowed ? 'allowed' : 'denied' });
    if (d.allowed) return;
    throw new GatewayError('MONTHLY_LIMIT_EXCEEDED', undefined, {
      extra: { limit, used: d.used, reset_at: new Date(month.resetAt).toISOString() },
      headers: { 'Retry-After': String(Math.max(1, Math.ceil((month.resetAt - now) / 1000))) },
    });
  }

  /**
   * Adds the counted requests to `monthly_usage` in one statement. A failed write keeps them for the
   * next attempt, which backs off; never rejects.
   */
  flush(): Promise<void> {
    if (this.flushing) return this.flushing;
    if (this.pending.size === 0) return Promise.resolve();
    this.inFlight = this.pending;
    this.pending = new Map();
    const batch = [...this.inFlight.values()];
    this.flushing = this.usage
      .addCounts(batch)
      .then(
        () => {
          this.flushFailures = 0;
          this.nextFlushAt = 0;
        },
        (err: unknown) => {
          for (const d of batch) this.addPending(d.orgId, d.month, d.count);
          this.flushFailures++;
          this.nextFlushAt = this.now() + Math.min(MAX_FLUSH_BACKOFF_MS, this.o.flushIntervalMs * 2 ** this.flushFailures);
          this.metrics.storeErrors.inc({ store: 'analytics' });
          this.warning.warn('analytics-store:monthly-usage', err, { pending_orgs: this.pending.size, retry: 'with back-off' });
        },
      )
      .finally(() => {
        this.inFlight = new Map();
        this.flushing = undefined;
      });
    return this.flushing;
  }

  /** SIGTERM (docs/architecture.md "Graceful shutdown"): the counts still held are written, within a bound; runs before the stores close. */
  async beforeApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    try {
      await withTimeout(this.flush().then(() => this.flush()), 5_000, 'monthly usage flush');
    } catch (err) {
      this.warning.warn('analytics-store:monthly-usage', err);
    }
    const left = [...this.pending.values(), ...this.inFlight.values()].reduce((n, d) => n + d.count, 0);
    if (left > 0) this.log.warn({ topic: 'monthly-usage', unwritten_requests: left }, 'monthly usage not written at shutdown');
    await this.local.close();
  }

  private async countMonthly(orgId: string, month: Month, limit: number, ttlMs: number): Promise<MonthlyDecision> {
    const key = monthKey(orgId, month);

    if (this.reseed.has(key)) {
      // Requests were counted in the analytics store while the cache was down: the cache counter
      // misses them, so it is dropped and rebuilt from the durable count below.
      const dropped = await this.shared('monthly', () => this.cache.del(key).then(() => true));
      if (dropped) this.reseed.delete(key);
    }
    const d = await this.shared('monthly', () => this.cache.incrementBelow(key, limit, ttlMs));
    if (d) {
      this.leaveLocal(key);
      // incrementBelow is atomic: exactly one caller sees the counter it created (value 1).
      if (d.allowed && d.value === 1) return this.seed(orgId, month, key, limit, ttlMs);
      if (d.allowed) this.addPending(orgId, month.day, 1);
      this.remember(key, d.value);
      return { allowed: d.allowed, used: d.value };
    }

    // The cache is down: the analytics store decides, counting synchronously.
    const unwritten = this.pendingOf(orgId, month.day);
    try {
      const room = limit - unwritten;
      const deadline = this.config.gateway.stores.analytics_request_timeout_ms;
      const r =
        room >= 1
          ? await this.usage.incrementBelow(orgId, month.day, room, deadline)
          : { allowed: false, count: await this.usage.count(orgId, month.day, deadline) };
      this.fallbacks.inc({ limit: 'monthly', to: 'analytics' });
      if (r.allowed) this.reseed.add(key);
      this.leaveLocal(key);
      this.remember(key, r.count + unwritten);
      return { allowed: r.allowed, used: r.count + unwritten };
    } catch (err) {
      this.metrics.storeErrors.inc({ store: 'analytics' });
      this.warning.warn('analytics-store:monthly-limit', err, { fallback: 'per-replica count' });
    }

    // Both stores down: still bounded, per replica, from the last count this replica saw.
    this.fallbacks.inc({ limit: 'monthly', to: 'local' });
    const known = this.lastUsed.get(key) ?? 0;
    this.localMonthly.add(key);
    const l = await this.local.incrementBelow(key, Math.max(0, limit - known), ttlMs);
    if (l.allowed) {
      this.addPending(orgId, month.day, 1);
      this.reseed.add(key);
    }
    return { allowed: l.allowed, used: known + l.value };
  }

  /**
   * The caller created the month's counter: it was missing (a new month, or the cache lost it), so
   * it is raised by the durable count plus what this replica has not written yet. Concurrent
   * requests of other replicas in the moment between creation and seeding may be overwritten; the
   * durable count still has them.
   */
  private async seed(orgId: string, month: Month, key: string, limit: number, ttlMs: number): Promise<MonthlyDecision> {
    const unwritten = this.pendingOf(orgId, month.day);
    let durable: number;
    try {
      // The deadline lets the store breaker see a frozen server; withTimeout bounds the embedded store too.
      durable = await withTimeout(this.usage.count(orgId, month.day, this.o.seedTimeoutMs), this.o.seedTimeoutMs, 'monthly usage read');
    } catch (err) {
      this.metrics.storeErrors.inc({ store: 'analytics' });
      this.warning.warn('analytics-store:monthly-seed', err, { org_id: orgId, effect: 'monthly counter starts from the cache count' });
      this.addPending(orgId, month.day, 1);
      return { allowed: true, used: 1 };
    }
    const base = durable + unwritten;
    if (base === 0) {
      this.addPending(orgId, month.day, 1);
      this.remember(key, 1);
      return { allowed: true, used: 1 };
    }
    try {
      const current = Number((await this.cache.get(key)) ?? '1');
      const total = base + current;
      const allowed = total <= limit;
      // A refused request is not counted (incrementBelow's rule): take back the one it added.
      const value = allowed ? total : total - 1;
      await this.cache.set(key, String(value), ttlMs);
      if (allowed) this.addPending(orgId, month.day, 1);
      this.remember(key, value);
      return { allowed, used: value };
    } catch (err) {
      this.storeFailed(err);
      this.reseed.add(key);
      this.addPending(orgId, month.day, 1);
      return { allowed: true, used: 1 };
    }
  }

  /** One call to the cache store, or undefined when it failed or is being skipped after a failure. */
  private async shared<T>(what: 'rate' | 'monthly', call: () => Promise<T>): Promise<T | undefined> {
    if (this.now() < this.sharedRetryAt) return undefined;
    try {
      return await call();
    } catch (err) {
      this.sharedRetryAt = this.now() + this.o.storeRetryMs;
      this.storeFailed(err, what);
      return undefined;
    }
  }

  private storeFailed(err: unknown, what?: 'rate' | 'monthly'): void {
    this.metrics.storeErrors.inc({ store: 'cache' });
    this.warning.warn('cache-store:limits', err, {
      fallback: what === 'rate' ? 'per-replica rate limiter' : what === 'monthly' ? 'monthly limit in the analytics store' : 'monthly counter reseeded later',
    });
  }

  private addPending(orgId: string, day: string, count: number): void {
    const k = usageKey(orgId, day);
    const d = this.pending.get(k);
    if (d) d.count += count;
    else this.pending.set(k, { orgId, month: day, count });
  }

  private pendingOf(orgId: string, day: string): number {
    const k = usageKey(orgId, day);
    return (this.pending.get(k)?.count ?? 0) + (this.inFlight.get(k)?.count ?? 0);
  }

  private remember(key: string, used: number): void {
    setBounded(this.lastUsed, key, used, this.o.localMaxKeys);
  }

  /** A store answered again: the in-process count of an outage is dropped (its requests are pending for the analytics store). */
  private leaveLocal(key: string): void {
    if (!this.localMonthly.delete(key)) return;
    void this.local.del(key).catch(() => undefined);
  }
}
