import { BeforeApplicationShutdown, Injectable, Optional } from '@nestjs/common';
import type { Logger } from 'pino';
import { Counter } from 'prom-client';
import { GatewayError } from '../common/errors/gateway-error';
import type { Caller } from '../common/http/request-context';
import { AppLogger } from '../common/logging/logger';
import { stripUndefined } from '../common/options';
import { AppConfig } from '../config/app-config';
import { MetricsService } from '../metrics/metrics.service';
import { retryAfter } from '../resilience/retry-after';
import { SharedOrLocalCache } from '../resilience/shared-or-local-cache';
import { StoreFallback } from '../resilience/store-fallback';
import { CacheStore, WindowCheck, WindowDecision } from '../stores/cache/cache-store';
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
  /** Degradation log interval. */
  logIntervalMs?: number;
  /** Keys held by the per-replica fallback limiter. */
  localMaxKeys?: number;
}

const DEFAULTS = {
  flushIntervalMs: 1_000,
  seedTimeoutMs: 1_000,
  logIntervalMs: 30_000,
  localMaxKeys: 10_000,
};

const RATE_WINDOW_MS = 60_000;
const EXPLAIN_WINDOW_MS = 60_000;
const CREATE_WINDOW_MS = 3_600_000;
/** Monthly counters outlive their month a little, so a replica with a late clock still finds them. */
const MONTH_KEY_GRACE_MS = 86_400_000;
const MAX_FLUSH_BACKOFF_MS = 30_000;
/** Log topic of every cache-store degradation of the rate and monthly limits. */
const CACHE_TOPIC = 'cache-store:limits';

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
/** The experiment create budget's sliding window; the hash tag keeps the key on the organisation's slot. */
const createsKey = (orgId: string): string => `exp:{org:${orgId}}:creates`;

/** Explain's two windows; both share the organisation's hash tag, so one script can touch them on Redis Cluster. */
export function explainWindows(caller: Caller, limits: { perOrg: number; perKey: number }): WindowCheck[] {
  const tag = `{org:${caller.orgId}}`;
  return [
    { key: `explain:${tag}:org`, limit: limits.perOrg, windowMs: EXPLAIN_WINDOW_MS },
    { key: `explain:${tag}:key:${caller.keyId}`, limit: limits.perKey, windowMs: EXPLAIN_WINDOW_MS },
  ];
}

/** What the experiment create budget is decided on when the cache store failed: the organisation's creates in the window, counted in the analytics store. */
export interface CountedCreates {
  count: number;
  /** Until the oldest of them leaves the window. */
  retryAfterMs: number;
}

/**
 * Every limit of the gateway, and the 429 (or 503) each one answers with (docs/architecture.md "One
 * limiter for every limit"): the per-key rate limit (chat, responses, embeddings, feedback), the
 * per-organisation monthly limit (chat, responses), explain's two windows and the experiment create
 * budget.
 *
 * All are decided in the cache store, atomically, so replicas share them. Monthly counts also go
 * to `monthly_usage`, added in batches off the hot path; that durable count seeds a counter the
 * cache lost. When the cache store fails the rate limit is enforced per replica by an
 * in-process limiter (bounded, never unlimited) and the monthly limit by the analytics store; with
 * both stores down, the monthly limit is enforced per replica from the last count this replica saw.
 * Explain's limits fail closed instead (docs/architecture.md "Explain's limits fail closed"), and
 * the create budget is counted in the analytics store, inside the create's own transaction.
 * Every degradation is counted in metrics and logged at most once per interval (StoreFallback); a
 * cache store the store breaker already knows to be down costs no wait (SharedOrLocalCache).
 */
@Injectable()
export class LimitsService implements BeforeApplicationShutdown {
  private readonly o: typeof DEFAULTS;
  private readonly now: () => number;
  private readonly cache: SharedOrLocalCache;
  private readonly log: Logger;
  private readonly fallback: StoreFallback;
  private readonly decisions: Counter<'limit' | 'endpoint' | 'outcome'>;
  private readonly fallbacks: Counter<'limit' | 'to'>;
  private readonly timer: NodeJS.Timeout;

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
    cache: CacheStore,
    private readonly usage: MonthlyUsageRepository,
    metrics: MetricsService,
    logger: AppLogger,
    fallback: StoreFallback,
    private readonly config: AppConfig,
    @Optional() options?: LimitsOptions,
  ) {
    const given = stripUndefined(options);
    this.o = { ...DEFAULTS, ...given } as typeof DEFAULTS;
    this.now = given.now ?? Date.now;
    this.log = logger.pino;
    this.fallback = fallback.withLogInterval(this.o.logIntervalMs);
    this.cache = new SharedOrLocalCache(cache, this.fallback, { now: this.now, maxEntries: this.o.localMaxKeys });
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
   * GatewayError('rate_limited', …) with Retry-After.
   */
  async checkKeyRate(caller: Caller, endpoint: RateLimitedEndpoint): Promise<void> {
    const limit = this.config.gateway.limits.requests_per_minute_per_key;
    if (limit === null) return;
    const checks: WindowCheck[] = [{ key: rateKey(caller.keyId, endpoint), limit, windowMs: RATE_WINDOW_MS }];
    let d = await this.shared('rate', (s) => s.hitWindows(checks));
    if (!d) {
      this.fallbacks.inc({ limit: 'rate', to: 'local' });
      d = await this.cache.local.hitWindows(checks);
    }
    this.decisions.inc({ limit: 'rate', endpoint, outcome: d.allowed ? 'allowed' : 'denied' });
    if (d.allowed) return;
    throw new GatewayError('rate_limited', `Rate limit exceeded: ${limit} requests per minute for this API key.`, { headers: retryAfter(d.retryAfterMs) });
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
      headers: retryAfter(month.resetAt - now),
    });
  }

  /**
   * Explain's limits (config `limits.explain_per_minute_per_org`, default 30, and
   * `explain_per_minute_per_key`, default 10): both windows checked and spent in one atomic step, a
   * denied request spends neither. Fails closed: with the cache store unreachable, 503 `internal`
   * (docs/architecture.md "Explain's limits fail closed"). Over a limit: 429 `rate_limited` naming it.
   */
  async checkExplain(caller: Caller): Promise<void> {
    const { explain_per_minute_per_org: perOrg, explain_per_minute_per_key: perKey } = this.config.gateway.limits;
    const checks = explainWindows(caller, { perOrg, perKey });
    let d: WindowDecision;
    try {
      d = await this.cache.shared.hitWindows(checks);
    } catch (err) {
      // No per-replica fallback: explain's cap protects routing internals from a leaked key.
      this.fallback.failed('cache', 'cache-store:explain-limit', err, { effect: 'routing explain refused (fails closed)' });
      throw new GatewayError('internal', 'Routing explain is unavailable: its rate limiter cannot be reached.', { status: 503 });
    }
    if (d.allowed) return;
    const which = d.deniedIndex === 0 ? `${perOrg} per minute for the organisation` : `${perKey} per minute for this API key`;
    throw new GatewayError('rate_limited', `Routing explain rate limit exceeded: ${which}.`, { headers: retryAfter(d.retryAfterMs) });
  }

  /**
   * Spends one experiment create of the organisation's budget (config
   * `limits.experiment_creates_per_hour`, default 20, sliding window); 429 `rate_limited` when it is
   * spent. Resolves false when the cache store could not decide: the budget is then decided by
   * `checkExperimentCreatesCounted` inside the create's own transaction (shared by every replica
   * and never unlimited; it counts created experiments only).
   */
  async spendExperimentCreate(orgId: string): Promise<boolean> {
    const limit = this.config.gateway.limits.experiment_creates_per_hour;
    let d: WindowDecision;
    try {
      d = await this.cache.shared.hitWindows([{ key: createsKey(orgId), limit, windowMs: CREATE_WINDOW_MS }]);
    } catch (err) {
      this.fallback.failed('cache', 'cache-store:experiment-budget', err, { fallback: 'create budget counted in the analytics store' });
      return false;
    }
    if (!d.allowed) throw this.overCreateBudget(limit, d.retryAfterMs);
    return true;
  }

  /**
   * The create budget decided in the analytics store: `count` counts the organisation's experiments
   * created in the window it is given (the caller runs it in its create transaction, under its
   * per-organisation lock, so concurrent creates on any replica are counted one after the other).
   */
  async checkExperimentCreatesCounted(count: (windowMs: number) => Promise<CountedCreates>): Promise<void> {
    const limit = this.config.gateway.limits.experiment_creates_per_hour;
    const counted = await count(CREATE_WINDOW_MS);
    if (counted.count >= limit) throw this.overCreateBudget(limit, counted.retryAfterMs);
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
          this.fallback.failed('analytics', 'analytics-store:monthly-usage', err, { pending_orgs: this.pending.size, retry: 'with back-off' });
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
      this.fallback.warn('analytics-store:monthly-usage', err);
    }
    const left = [...this.pending.values(), ...this.inFlight.values()].reduce((n, d) => n + d.count, 0);
    if (left > 0) this.log.warn({ topic: 'monthly-usage', unwritten_requests: left }, 'monthly usage not written at shutdown');
    await this.cache.close();
  }

  private async countMonthly(orgId: string, month: Month, limit: number, ttlMs: number): Promise<MonthlyDecision> {
    const key = monthKey(orgId, month);

    if (this.reseed.has(key)) {
      // Requests were counted in the analytics store while the cache was down: the cache counter
      // misses them, so it is dropped and rebuilt from the durable count below.
      const dropped = await this.shared('monthly', (s) => s.del(key).then(() => true));
      if (dropped) this.reseed.delete(key);
    }
    const d = await this.shared('monthly', (s) => s.incrementBelow(key, limit, ttlMs));
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
      this.fallback.failed('analytics', 'analytics-store:monthly-limit', err, { fallback: 'per-replica count' });
    }

    // Both stores down: still bounded, per replica, from the last count this replica saw.
    this.fallbacks.inc({ limit: 'monthly', to: 'local' });
    const known = this.lastUsed.get(key) ?? 0;
    this.localMonthly.add(key);
    const l = await this.cache.local.incrementBelow(key, Math.max(0, limit - known), ttlMs);
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
      this.fallback.failed('analytics', 'analytics-store:monthly-seed', err, { org_id: orgId, effect: 'monthly counter starts from the cache count' });
      this.addPending(orgId, month.day, 1);
      return { allowed: true, used: 1 };
    }
    const base = durable + unwritten;
    if (base === 0) {
      this.addPending(orgId, month.day, 1);
      this.remember(key, 1);
      return { allowed: true, used: 1 };
    }
    const seeded = await this.cache.tryShared(
      async (s) => {
        const current = Number((await s.get(key)) ?? '1');
        const total = base + current;
        const allowed = total <= limit;
        // A refused request is not counted (incrementBelow's rule): take back the one it added.
        const value = allowed ? total : total - 1;
        await s.set(key, String(value), ttlMs);
        return { allowed, used: value };
      },
      CACHE_TOPIC,
      { fallback: 'monthly counter reseeded later' },
    );
    if (!seeded) {
      this.reseed.add(key);
      this.addPending(orgId, month.day, 1);
      return { allowed: true, used: 1 };
    }
    if (seeded.allowed) this.addPending(orgId, month.day, 1);
    this.remember(key, seeded.used);
    return seeded;
  }

  /** One call to the cache store; undefined when it failed (counted, logged) or the store breaker refused it. */
  private shared<T extends {} | null>(what: 'rate' | 'monthly', call: (store: CacheStore) => Promise<T>): Promise<T | undefined> {
    return this.cache.tryShared(call, CACHE_TOPIC, { fallback: what === 'rate' ? 'per-replica rate limiter' : 'monthly limit in the analytics store' });
  }

  private overCreateBudget(limit: number, retryAfterMs: number): GatewayError {
    return new GatewayError('rate_limited', `Experiment create budget exceeded: ${limit} per organisation per hour.`, { headers: retryAfter(retryAfterMs) });
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
    void this.cache.local.del(key).catch(() => undefined);
  }
}
