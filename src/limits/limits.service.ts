import { BeforeApplicationShutdown, Injectable, Optional } from '@nestjs/common';
import type { Logger } from 'pino';
import { Counter } from 'prom-client';
import { setBounded } from '../common/bounded-map';
import { SingleFlight } from '../common/concurrency/single-flight';
import { GatewayError } from '../common/errors/gateway-error';
import type { Caller } from '../common/http/request-context';
import { AppLogger } from '../common/logging/logger';
import { stripUndefined } from '../common/options';
import { ownValue } from '../common/own-key';
import { AppConfig } from '../config/app-config';
import type { TargetRef } from '../config/gateway-config';
import type { OrgLimits } from '../config/gateway-config.schema';
import { MetricsService } from '../metrics/metrics.service';
import type { ChatMessage } from '../providers/provider-adapter';
import { retryAfter } from '../resilience/retry-after';
import { SharedOrLocalCache } from '../resilience/shared-or-local-cache';
import { StoreFallback } from '../resilience/store-fallback';
import { estimateCost, estimateTokens, TokenEstimate } from '../routing/strategies/cost';
import { CacheStore, SettleCounter, SettleWindow, SpendCounter, SpendDecision, SpendWindow, WindowCheck, WindowDecision } from '../stores/cache/cache-store';
import { withTimeout } from '../stores/with-timeout';
import { callerMayUse, hasAllowList } from './model-allow-list';
import { MonthlySpendRepository, SpendDelta } from './monthly-spend.repository';
import { MonthlyUsageRepository, UsageDelta } from './monthly-usage.repository';

export type RateLimitedEndpoint = 'chat' | 'embeddings' | 'feedback';

export class LimitsOptions {
  /** Milliseconds since the epoch (tests move it across a month end). */
  now?: () => number;
  /** How often counted requests and spend are added to `monthly_usage` and `monthly_spend`. */
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
/** Budgets are counted in whole micro-USD: integers every store adds exactly. */
const MICRO = 1_000_000;

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

/**
 * Keys of one request's limits all share the organisation's hash tag (docs/architecture.md
 * "Stateless replicas"), so one script checks every window and counter of a request on Redis Cluster.
 */
const rateKey = (orgId: string, keyId: string, endpoint: RateLimitedEndpoint): string => `rl:{org:${orgId}}:key:${keyId}:${endpoint}`;
const controlKey = (orgId: string, keyId: string | null, what: 'rpm' | 'tpm'): string => (keyId === null ? `lim:{org:${orgId}}:${what}` : `lim:{org:${orgId}}:key:${keyId}:${what}`);
const monthKey = (orgId: string, month: Month): string => `ml:{org:${orgId}}:${month.label}`;
const budgetKey = (orgId: string, keyId: string | null, month: Month): string => (keyId === null ? `bud:{org:${orgId}}:${month.label}` : `bud:{org:${orgId}}:key:${keyId}:${month.label}`);
const usageKey = (orgId: string, day: string): string => `${orgId}\u0000${day}`;
const spendKey = (orgId: string, keyId: string, day: string): string => `${orgId}\u0000${keyId}\u0000${day}`;
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

/** What a request may spend, estimated before it is sent: charged up front, settled when the answer says (README "Limits"). */
export interface SpendAsk {
  /** Tokens against `tokens_per_minute`: the prompt's estimate plus the answer's bound. */
  tokens: number;
  /** Micro-USD against `monthly_budget_usd`: those tokens at the dearest price of the targets that may serve it. */
  microUsd: number;
}

/** What a request turned out to use: the decision trace's figures (tokens as the upstream reported them, cost from the catalogue). */
export interface SpendUsed {
  status: number;
  promptTokens: number | null;
  completionTokens: number | null;
  costUsd: number | null;
}

type Label = 'rate' | 'requests_per_minute' | 'tokens_per_minute' | 'monthly' | 'budget';
type Scope = 'key' | 'org';

interface PlannedWindow extends SpendWindow {
  label: 'rate' | 'requests_per_minute' | 'tokens_per_minute';
  of: Scope;
  /** The configured limit, as the 429 names it. */
  shown: number;
}

interface PlannedCounter extends SpendCounter {
  label: 'monthly' | 'budget';
  of: Scope;
  /** The durable row: `monthly_usage` of the organisation (requests), or `monthly_spend` of the key or the organisation (keyId ''). */
  keyId: string;
}

interface Plan {
  caller: Caller;
  endpoint: RateLimitedEndpoint;
  now: number;
  month: Month;
  windows: PlannedWindow[];
  counters: PlannedCounter[];
}

/** Where a spent counter was counted: the cache store, the analytics store (the cache was down), or this replica alone (both were). */
type CountedIn = 'shared' | 'analytics' | 'local';

/** What an admitted request holds until `settle`: the hits and amounts it was charged up front. */
export interface Admission {
  readonly month: Month;
  /** Where its windows were spent, and its hit there. */
  readonly store: 'shared' | 'local';
  readonly hit: string | null;
  readonly tokenWindows: readonly { key: string; cost: number }[];
  readonly budgets: readonly { key: string; keyId: string; amount: number; in: CountedIn }[];
}

/** One limit that refused a request: the 429 it answers with. */
interface Denial {
  entry: PlannedWindow | PlannedCounter;
  retryAfterMs: number;
  /** For a counter: its value (requests, or micro-USD of a budget). */
  used: number;
}

/**
 * Every limit of the gateway, and the 429 (or 403, 503) each one answers with (docs/architecture.md
 * "One limiter for every limit"): the per-key rate limit of the config (chat, responses, embeddings,
 * feedback), the per-organisation monthly request limit (chat, responses), the per-key and
 * per-organisation controls (README "Limits": requests and tokens per minute, a monthly spend
 * budget, a model allow-list), explain's two windows and the experiment create budget.
 *
 * All of a request's windows and counters are decided in the cache store in one atomic step (one
 * script), so replicas share them and a refused request spends none. Tokens and spend are charged
 * up front from an estimate and settled when the answer says what it used. Monthly counts and spend
 * also go to `monthly_usage` and `monthly_spend`, added in batches off the hot path; those durable
 * counts seed a counter the cache lost. When the cache store fails the windows are enforced per
 * replica by an in-process limiter (bounded, never unlimited) and the counters by the analytics
 * store; with both stores down, the counters are enforced per replica from the last value this
 * replica saw. Explain's limits fail closed instead (docs/architecture.md "Explain's limits fail
 * closed"), and the create budget is counted in the analytics store, inside the create's own
 * transaction. Every degradation is counted in metrics and logged at most once per interval
 * (StoreFallback); a cache store the store breaker already knows to be down costs no wait
 * (SharedOrLocalCache).
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
  /** Spend not yet in `monthly_spend`, per (org, key or '', month). */
  private pendingSpend = new Map<string, SpendDelta>();
  private inFlightSpend = new Map<string, SpendDelta>();
  private flushing: Promise<void> | undefined;
  private flushFailures = 0;
  private nextFlushAt = 0;
  /** Counters this replica counted in the analytics store while the cache was down: rebuilt from it when the cache is back. */
  private readonly reseed = new Set<string>();
  /** Counters this replica counted in process while both stores were down. */
  private readonly localMonthly = new Set<string>();
  /** The last value seen per counter: where the in-process count starts when both stores are down. */
  private readonly lastUsed = new Map<string, number>();
  /** Durable reads of missing counters under way, shared by the requests that wait on them. */
  private readonly seeding = new SingleFlight<string, number>();
  /**
   * Budget charged up front by this replica's requests still in flight, per (org, key or '', month):
   * spend no durable row holds yet, counted when a budget is seeded or decided in the analytics store.
   */
  private readonly reserved = new Map<string, number>();

  constructor(
    cache: CacheStore,
    private readonly usage: MonthlyUsageRepository,
    metrics: MetricsService,
    logger: AppLogger,
    fallback: StoreFallback,
    private readonly config: AppConfig,
    @Optional() options?: LimitsOptions,
    @Optional() private readonly spendRepo?: MonthlySpendRepository,
  ) {
    const given = stripUndefined(options);
    this.o = { ...DEFAULTS, ...given } as typeof DEFAULTS;
    this.now = given.now ?? Date.now;
    this.log = logger.pino;
    this.fallback = fallback.withLogInterval(this.o.logIntervalMs);
    this.cache = new SharedOrLocalCache(cache, this.fallback, { now: this.now, maxEntries: this.o.localMaxKeys });
    this.decisions = new Counter({
      name: 'gateway_limiter_decisions_total',
      help: 'Limit decisions by limit (rate, requests_per_minute, tokens_per_minute, monthly, budget), endpoint and outcome',
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
   * The model allow-lists of the caller's key and organisation (README "Limits"): every entry of
   * `model` (each part of a comma list, a `provider/model` pair, an alias) must be on both, else 403
   * `model_not_allowed`, before the body is validated and before any upstream call (docs/api.md
   * "Check order"). Reads `model` from the raw body; a body without a string `model` is left to
   * validation. No store call; nothing at all for a caller without a list.
   */
  checkModel(caller: Caller, body: unknown): void {
    if (!hasAllowList(caller) || body === null || typeof body !== 'object') return;
    const model = ownValue(body as Record<string, unknown>, 'model');
    if (typeof model !== 'string') return;
    const models = this.config.gateway.models;
    for (const name of model.split(',').map((s) => s.trim())) {
      if (!callerMayUse(caller, name, models)) throw new GatewayError('model_not_allowed', `This API key may not use the model "${name.slice(0, 256)}".`, { param: 'model' });
    }
  }

  /** Whether the caller may use the model name (`GET /v1/models` lists only those). */
  mayUse(caller: Caller, name: string): boolean {
    return !hasAllowList(caller) || callerMayUse(caller, name, this.config.gateway.models);
  }

  /**
   * What a chat request may spend: its prompt's estimate (characters / 4) plus `max_tokens`, else
   * `limits.default_completion_tokens`, at the dearest price of the targets that may serve it.
   */
  chatAsk(messages: readonly ChatMessage[], maxCompletionTokens: number | undefined, targets: readonly TargetRef[]): SpendAsk {
    return this.ask(estimateTokens(messages, maxCompletionTokens, this.config.gateway.limits.default_completion_tokens), targets);
  }

  /** What an embeddings request may spend: its inputs' estimate, no answer tokens. */
  embeddingsAsk(input: readonly string[], targets: readonly TargetRef[]): SpendAsk {
    let chars = 0;
    for (const text of input) chars += text.length;
    return this.ask({ input: Math.ceil(chars / 4), output: 0 }, targets);
  }

  /**
   * Admits a request of `endpoint` or throws its 429: the config's per-key rate limit, the key's and
   * the organisation's `requests_per_minute`, and (chat, responses, embeddings) their
   * `tokens_per_minute` and `monthly_budget_usd` charged with `ask()`, and with `monthly` the
   * organisation's monthly request limit, all checked and spent in one step. Undefined when the
   * caller has none of them: no store call, and `ask` is never computed.
   */
  async admit(caller: Caller, endpoint: RateLimitedEndpoint, ask?: () => SpendAsk, monthly = false): Promise<Admission | undefined> {
    const plan = this.plan(caller, endpoint, ask, monthly);
    if (!plan) return undefined;
    return this.run(plan);
  }

  /**
   * After the answer (its decision trace): each tokens window and budget is moved from what was
   * charged up front to what the request used — a failed request that used nothing gives it all
   * back, an answer without usage keeps the estimate — and the request's spend (from the catalogue's
   * costs) is added to `monthly_spend` in the next batch. Never rejects, never waits on a store.
   */
  settle(caller: Caller, admission: Admission | undefined, used: SpendUsed): void {
    const ok = used.status >= 200 && used.status < 300;
    const known = used.promptTokens !== null;
    const tokens = known ? used.promptTokens! + (used.completionTokens ?? 0) : ok ? null : 0;
    const micro = used.costUsd !== null ? Math.round(used.costUsd * MICRO) : known || !ok ? 0 : null;
    const month = admission?.month ?? monthOf(this.now());
    for (const b of admission?.budgets ?? []) if (b.in !== 'analytics') this.reserve(caller.orgId, b.keyId, month.day, -b.amount);

    for (const keyId of ['', caller.keyId]) {
      const budget = admission?.budgets.find((b) => b.keyId === keyId);
      // Spent in the analytics store up front (the cache was down): only the difference is left to add.
      const written = budget?.in === 'analytics' ? budget.amount : 0;
      const delta = (micro ?? budget?.amount ?? 0) - written;
      if (delta !== 0) this.addPendingSpend(caller.orgId, keyId, month.day, delta);
    }
    if (!admission) return;

    const windows: SettleWindow[] = [];
    if (admission.hit !== null && tokens !== null) {
      for (const w of admission.tokenWindows) if (w.cost !== tokens) windows.push({ key: w.key, hit: admission.hit, from: w.cost, to: tokens });
    }
    const counters: SettleCounter[] = [];
    for (const b of admission.budgets) {
      if (b.in === 'analytics' || micro === null || micro === b.amount) continue;
      counters.push({ key: b.key, delta: micro - b.amount });
    }
    if (windows.length === 0 && counters.length === 0) return;
    if (admission.store === 'local' || admission.budgets.some((b) => b.in === 'local')) {
      void this.cache.local.settle(windows, counters).catch(() => undefined);
      return;
    }
    void this.cache.tryShared((s) => s.settle(windows, counters).then(() => true), CACHE_TOPIC, { effect: 'an estimate stays charged until its window slides' });
  }

  /**
   * Per-key rate limit (config `limits.requests_per_minute_per_key`, sliding window) for endpoint
   * 'chat' | 'embeddings' | 'feedback'; null (the default) = unlimited, and no store call. Throws
   * GatewayError('rate_limited', …) with Retry-After.
   */
  async checkKeyRate(caller: Caller, endpoint: RateLimitedEndpoint): Promise<void> {
    const windows = this.rateWindows(caller, endpoint);
    if (windows.length === 0) return;
    await this.run({ caller, endpoint, now: this.now(), month: monthOf(this.now()), windows, counters: [] });
  }

  /** Monthly request limit of the caller's organisation (chat only); `monthlyRequestLimit === null` = unlimited (no store call). Throws GatewayError('MONTHLY_LIMIT_EXCEEDED') with `limit`, `used`, `reset_at` and Retry-After. */
  async checkMonthly(caller: Caller): Promise<void> {
    const now = this.now();
    const month = monthOf(now);
    const counters = this.monthlyCounters(caller, month, now);
    if (counters.length === 0) return;
    await this.run({ caller, endpoint: 'chat', now, month, windows: [], counters });
  }

  /**
   * The organisation's and its keys' spend this month (micro-USD, keyId '' = the organisation), from
   * `monthly_spend` plus what this replica has not written yet; for the Admin API.
   */
  async spendOf(orgId: string): Promise<{ month: Month; spend: Map<string, number> }> {
    const month = monthOf(this.now());
    const spend = this.spendRepo ? await this.spendRepo.ofOrg(orgId, month.day) : new Map<string, number>();
    for (const d of [...this.pendingSpend.values(), ...this.inFlightSpend.values()]) {
      if (d.orgId === orgId && d.month === month.day) spend.set(d.keyId, (spend.get(d.keyId) ?? 0) + d.microUsd);
    }
    return { month, spend };
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
   * Adds the counted requests to `monthly_usage` and the spend to `monthly_spend`, one statement
   * each. A failed write keeps them for the next attempt, which backs off; never rejects.
   */
  flush(): Promise<void> {
    if (this.flushing) return this.flushing;
    if (this.pending.size === 0 && this.pendingSpend.size === 0) return Promise.resolve();
    this.inFlight = this.pending;
    this.pending = new Map();
    this.inFlightSpend = this.pendingSpend;
    this.pendingSpend = new Map();
    const batch = [...this.inFlight.values()];
    const spend = [...this.inFlightSpend.values()];
    const write = async (): Promise<void> => {
      if (batch.length) {
        await this.usage.addCounts(batch);
        // Written: a failure of the spend statement below must not count these twice.
        this.inFlight = new Map();
        batch.length = 0;
      }
      if (spend.length && this.spendRepo) await this.spendRepo.add(spend);
    };
    this.flushing = write()
      .then(
        () => {
          this.flushFailures = 0;
          this.nextFlushAt = 0;
        },
        (err: unknown) => {
          for (const d of batch) this.addPending(d.orgId, d.month, d.count);
          for (const d of spend) this.addPendingSpend(d.orgId, d.keyId, d.month, d.microUsd);
          this.flushFailures++;
          this.nextFlushAt = this.now() + Math.min(MAX_FLUSH_BACKOFF_MS, this.o.flushIntervalMs * 2 ** this.flushFailures);
          this.fallback.failed('analytics', 'analytics-store:monthly-usage', err, { pending_orgs: this.pending.size, retry: 'with back-off' });
        },
      )
      .finally(() => {
        this.inFlight = new Map();
        this.inFlightSpend = new Map();
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
    const spendLeft = this.pendingSpend.size + this.inFlightSpend.size;
    if (spendLeft > 0) this.log.warn({ topic: 'monthly-usage', unwritten_spend_rows: spendLeft }, 'monthly spend not written at shutdown');
    await this.cache.close();
  }

  // ---- the plan of one request ----

  private plan(caller: Caller, endpoint: RateLimitedEndpoint, ask: (() => SpendAsk) | undefined, monthly: boolean): Plan | undefined {
    const now = this.now();
    const month = monthOf(now);
    const windows = this.rateWindows(caller, endpoint);
    const counters = monthly ? this.monthlyCounters(caller, month, now) : [];
    const key = caller.limits?.key;
    const org = caller.limits?.org;
    const rpm = (l: OrgLimits | undefined, of: Scope, keyId: string | null) => {
      if (l?.requests_per_minute === undefined) return;
      const limit = l.requests_per_minute;
      windows.push({ key: controlKey(caller.orgId, keyId, 'rpm'), limit, windowMs: RATE_WINDOW_MS, cost: 1, label: 'requests_per_minute', of, shown: limit });
    };
    rpm(key, 'key', caller.keyId);
    rpm(org, 'org', null);
    // Feedback spends no tokens and no money: only the request windows apply to it.
    const spends = endpoint !== 'feedback' && ask !== undefined;
    const tpm = spends && (key?.tokens_per_minute !== undefined || org?.tokens_per_minute !== undefined);
    const budget = spends && (key?.monthly_budget_usd !== undefined || org?.monthly_budget_usd !== undefined);
    if (tpm || budget) {
      const a = ask!();
      // An estimate over the whole limit is charged at the limit: the request fits an empty window
      // (or an untouched budget) instead of never, and settles to what it used.
      const tokens = (l: OrgLimits | undefined, of: Scope, keyId: string | null) => {
        if (l?.tokens_per_minute === undefined) return;
        const limit = l.tokens_per_minute;
        windows.push({ key: controlKey(caller.orgId, keyId, 'tpm'), limit, windowMs: RATE_WINDOW_MS, cost: Math.min(a.tokens, limit), label: 'tokens_per_minute', of, shown: limit });
      };
      tokens(key, 'key', caller.keyId);
      tokens(org, 'org', null);
      const spend = (l: OrgLimits | undefined, of: Scope, keyId: string | null) => {
        if (l?.monthly_budget_usd === undefined) return;
        const limit = Math.round(l.monthly_budget_usd * MICRO);
        counters.push({
          key: budgetKey(caller.orgId, keyId, month),
          limit,
          amount: Math.min(a.microUsd, limit),
          ttlMs: month.resetAt - now + MONTH_KEY_GRACE_MS,
          label: 'budget',
          of,
          keyId: keyId ?? '',
        });
      };
      spend(key, 'key', caller.keyId);
      spend(org, 'org', null);
    }
    if (windows.length === 0 && counters.length === 0) return undefined;
    return { caller, endpoint, now, month, windows, counters };
  }

  private rateWindows(caller: Caller, endpoint: RateLimitedEndpoint): PlannedWindow[] {
    const limit = this.config.gateway.limits.requests_per_minute_per_key;
    if (limit === null) return [];
    return [{ key: rateKey(caller.orgId, caller.keyId, endpoint), limit, windowMs: RATE_WINDOW_MS, cost: 1, label: 'rate', of: 'key', shown: limit }];
  }

  private monthlyCounters(caller: Caller, month: Month, now: number): PlannedCounter[] {
    const limit = caller.monthlyRequestLimit;
    if (limit === null) return [];
    return [{ key: monthKey(caller.orgId, month), limit, amount: 1, ttlMs: month.resetAt - now + MONTH_KEY_GRACE_MS, label: 'monthly', of: 'org', keyId: '' }];
  }

  private ask(tokens: TokenEstimate, targets: readonly TargetRef[]): SpendAsk {
    let usd = 0;
    for (const t of targets) usd = Math.max(usd, estimateCost(ownValue(this.config.gateway.models, t.model), tokens) ?? 0);
    return { tokens: tokens.input + tokens.output, microUsd: Math.ceil(usd * MICRO) };
  }

  // ---- deciding a plan ----

  private async run(plan: Plan): Promise<Admission> {
    const shared = await this.spendShared(plan);
    if (shared) {
      const d = shared;
      if (d.outcome !== 'allowed') this.deny(plan, this.denialOf(plan, d));
      plan.counters.forEach((c, j) => {
        this.leaveLocal(c.key);
        this.remember(c.key, d.counters[j]!);
        if (c.label === 'monthly') this.addPending(plan.caller.orgId, plan.month.day, 1);
      });
      this.allowed(plan);
      return this.admission(plan, 'shared', d.hit, () => 'shared');
    }

    // The cache store is down: windows per replica, counters in the analytics store (else per replica).
    let hit: string | null = null;
    if (plan.windows.length) {
      for (const label of new Set(plan.windows.map((w) => w.label))) this.fallbacks.inc({ limit: label, to: 'local' });
      const d = await this.cache.local.spend(plan.windows, []);
      if (d.outcome !== 'allowed') this.deny(plan, this.denialOf(plan, d));
      hit = d.hit;
    }
    const counted: { counter: PlannedCounter; in: CountedIn }[] = [];
    for (const c of plan.counters) {
      const r = await this.countWithoutCache(plan, c);
      if (r.allowed) {
        counted.push({ counter: c, in: r.in });
        continue;
      }
      // Refused: what this request already took is given back (a window to cost 0, a count subtracted).
      if (hit !== null) void this.cache.local.settle(plan.windows.map((w) => ({ key: w.key, hit: hit!, from: w.cost, to: 0 })), []).catch(() => undefined);
      for (const x of counted) this.refund(plan, x.counter, x.in);
      this.deny(plan, { entry: c, retryAfterMs: plan.month.resetAt - plan.now, used: r.used });
    }
    this.allowed(plan);
    return this.admission(plan, 'local', hit, (c) => counted.find((x) => x.counter === c)!.in);
  }

  /**
   * One spend in the cache store; undefined when it failed or was refused. A counter the cache lost
   * (or one to rebuild after an outage) is seeded from its durable count plus what this replica has
   * not written yet, and the spend made again with the seed: one extra round trip, once per counter
   * per month (or per loss).
   */
  private async spendShared(plan: Plan): Promise<SpendDecision | undefined> {
    let counters: SpendCounter[] = plan.counters;
    if (plan.counters.some((c) => this.reseed.has(c.key))) {
      counters = await Promise.all(plan.counters.map(async (c) => (this.reseed.has(c.key) ? this.seeded(plan, c, true) : c)));
    }
    let d = await this.shared((s) => s.spend(plan.windows, counters));
    if (d?.outcome === 'missing') {
      const seeded = await Promise.all(counters.map(async (c, j) => (d!.counters[j] === null ? this.seeded(plan, c as PlannedCounter, false) : c)));
      d = await this.shared((s) => s.spend(plan.windows, seeded));
      counters = seeded;
      if (d?.outcome === 'missing') throw new Error('a seeded counter is still missing');
    }
    // Rebuilt: the cache holds every request the analytics store counted meanwhile.
    if (d) for (const c of counters) if (c.reseed) this.reseed.delete(c.key);
    return d;
  }

  /**
   * The counter with its seed: its durable count plus this replica's unwritten part. Requests that
   * find the same counter missing at once share one read. When the analytics store cannot answer the
   * counter starts from the last value this replica saw (a rebuild is left for a later request).
   */
  private async seeded(plan: Plan, c: PlannedCounter, rebuild: boolean): Promise<SpendCounter> {
    // The deadline lets the store breaker see a frozen server; withTimeout bounds the embedded store too.
    const read = this.seeding.run(c.key, () => withTimeout(this.durableOf(plan, c, this.o.seedTimeoutMs), this.o.seedTimeoutMs, 'monthly usage read'));
    try {
      const durable = await read;
      return { ...c, seed: durable + this.unwritten(plan, c), reseed: rebuild };
    } catch (err) {
      this.fallback.failed('analytics', 'analytics-store:monthly-seed', err, { org_id: plan.caller.orgId, effect: 'counter starts from the last value seen' });
      return { ...c, seed: Math.max(this.lastUsed.get(c.key) ?? 0, this.unwritten(plan, c)) };
    }
  }

  private durableOf(plan: Plan, c: PlannedCounter, deadlineMs: number): Promise<number> {
    if (c.label === 'monthly') return this.usage.count(plan.caller.orgId, plan.month.day, deadlineMs);
    return this.spendRepo ? this.spendRepo.total(plan.caller.orgId, c.keyId, plan.month.day, deadlineMs) : Promise.resolve(0);
  }

  private unwritten(plan: Plan, c: PlannedCounter): number {
    if (c.label === 'monthly') return this.pendingOf(plan.caller.orgId, plan.month.day);
    const k = spendKey(plan.caller.orgId, c.keyId, plan.month.day);
    return Math.max(0, (this.pendingSpend.get(k)?.microUsd ?? 0) + (this.inFlightSpend.get(k)?.microUsd ?? 0) + (this.reserved.get(k) ?? 0));
  }

  private reserve(orgId: string, keyId: string, day: string, microUsd: number): void {
    if (microUsd === 0) return;
    const k = spendKey(orgId, keyId, day);
    const left = (this.reserved.get(k) ?? 0) + microUsd;
    if (left <= 0) this.reserved.delete(k);
    else this.reserved.set(k, left);
  }

  /** A counter decided without the cache store: check-and-count in the analytics store, else per replica from the last value seen. */
  private async countWithoutCache(plan: Plan, c: PlannedCounter): Promise<{ allowed: boolean; used: number; in: CountedIn }> {
    const unwritten = this.unwritten(plan, c);
    const { orgId } = plan.caller;
    try {
      const room = c.limit - unwritten;
      const deadline = this.config.gateway.stores.analytics_request_timeout_ms;
      let allowed: boolean;
      let total: number;
      if (c.label === 'monthly') {
        const r = room >= 1 ? await this.usage.incrementBelow(orgId, plan.month.day, room, deadline) : { allowed: false, count: await this.usage.count(orgId, plan.month.day, deadline) };
        [allowed, total] = [r.allowed, r.count];
      } else if (this.spendRepo) {
        const r = room >= c.amount ? await this.spendRepo.addBelow(orgId, c.keyId, plan.month.day, c.amount, room, deadline) : { allowed: false, total: await this.spendRepo.total(orgId, c.keyId, plan.month.day, deadline) };
        [allowed, total] = [r.allowed, r.total];
      } else throw new Error('no spend repository');
      this.fallbacks.inc({ limit: c.label, to: 'analytics' });
      if (allowed) this.reseed.add(c.key);
      this.leaveLocal(c.key);
      this.remember(c.key, total + unwritten);
      return { allowed, used: total + unwritten, in: 'analytics' };
    } catch (err) {
      this.fallback.failed('analytics', c.label === 'monthly' ? 'analytics-store:monthly-limit' : 'analytics-store:budget', err, { fallback: 'per-replica count' });
    }

    // Both stores down: still bounded, per replica, from the last value this replica saw.
    this.fallbacks.inc({ limit: c.label, to: 'local' });
    const known = this.lastUsed.get(c.key) ?? 0;
    this.localMonthly.add(c.key);
    const l = await this.cache.local.spend([], [{ key: c.key, limit: Math.max(0, c.limit - known), amount: c.amount, ttlMs: c.ttlMs, seed: 0 }]);
    const allowed = l.outcome === 'allowed';
    if (allowed) {
      if (c.label === 'monthly') this.addPending(orgId, plan.month.day, 1);
      this.reseed.add(c.key);
    }
    return { allowed, used: known + (l.counters[0] ?? 0), in: 'local' };
  }

  /** Gives back a counter a refused request had already taken without the cache (another of its counters refused it). */
  private refund(plan: Plan, c: PlannedCounter, where: CountedIn): void {
    if (where === 'local') {
      void this.cache.local.settle([], [{ key: c.key, delta: -c.amount }]).catch(() => undefined);
      if (c.label === 'monthly') this.addPending(plan.caller.orgId, plan.month.day, -1);
    } else if (c.label === 'monthly') this.addPending(plan.caller.orgId, plan.month.day, -1);
    else this.addPendingSpend(plan.caller.orgId, c.keyId, plan.month.day, -c.amount);
  }

  /** What the admitted request holds until it settles; its budgets not yet in a durable row are reserved on this replica. */
  private admission(plan: Plan, store: 'shared' | 'local', hit: string | null, countedIn: (c: PlannedCounter) => CountedIn): Admission {
    const budgets = plan.counters.filter((c) => c.label === 'budget').map((c) => ({ key: c.key, keyId: c.keyId, amount: c.amount, in: countedIn(c) }));
    for (const b of budgets) if (b.in !== 'analytics') this.reserve(plan.caller.orgId, b.keyId, plan.month.day, b.amount);
    return {
      month: plan.month,
      store,
      hit,
      tokenWindows: plan.windows.filter((w) => w.label === 'tokens_per_minute').map((w) => ({ key: w.key, cost: w.cost })),
      budgets,
    };
  }

  private denialOf(plan: Plan, d: SpendDecision): Denial {
    const i = d.deniedIndex;
    if (i < plan.windows.length) return { entry: plan.windows[i], retryAfterMs: d.retryAfterMs, used: 0 };
    const j = i - plan.windows.length;
    return { entry: plan.counters[j], retryAfterMs: plan.month.resetAt - plan.now, used: d.counters[j] ?? 0 };
  }

  /** One `allowed` per limit of the plan, a limit counted once however many windows or counters it has (its key's and its organisation's). */
  private allowed(plan: Plan): void {
    const seen: Label[] = [];
    for (const { label } of plan.windows) if (!seen.includes(label)) seen.push(label);
    for (const { label } of plan.counters) if (!seen.includes(label)) seen.push(label);
    for (const limit of seen) this.decisions.inc({ limit, endpoint: plan.endpoint, outcome: 'allowed' });
  }

  /** The 429 of the limit that refused the request (docs/api.md "Errors"). */
  private deny(plan: Plan, d: Denial): never {
    const e = d.entry;
    this.decisions.inc({ limit: e.label, endpoint: plan.endpoint, outcome: 'denied' });
    const whose = e.of === 'key' ? 'this API key' : 'the organisation';
    const resetAt = new Date(plan.month.resetAt).toISOString();
    switch (e.label) {
      case 'rate':
      case 'requests_per_minute':
        throw new GatewayError('rate_limited', `Rate limit exceeded: ${(e as PlannedWindow).shown} requests per minute for ${whose}.`, { headers: retryAfter(d.retryAfterMs) });
      case 'tokens_per_minute':
        throw new GatewayError('rate_limited', `Token rate limit exceeded: ${(e as PlannedWindow).shown} tokens per minute for ${whose}.`, { headers: retryAfter(d.retryAfterMs) });
      case 'monthly':
        throw new GatewayError('MONTHLY_LIMIT_EXCEEDED', undefined, { extra: { limit: e.limit, used: d.used, reset_at: resetAt }, headers: retryAfter(d.retryAfterMs) });
      case 'budget': {
        const limit = e.limit / MICRO;
        throw new GatewayError('budget_exceeded', `The monthly spend budget of ${limit} USD for ${whose} is exhausted.`, {
          extra: { limit, used: d.used / MICRO, reset_at: resetAt },
          headers: retryAfter(d.retryAfterMs),
        });
      }
    }
  }

  /** One call to the cache store; undefined when it failed (counted, logged) or the store breaker refused it. */
  private shared<T extends {} | null>(call: (store: CacheStore) => Promise<T>): Promise<T | undefined> {
    return this.cache.tryShared(call, CACHE_TOPIC, { fallback: 'per-replica windows; counters in the analytics store' });
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

  private addPendingSpend(orgId: string, keyId: string, day: string, microUsd: number): void {
    const k = spendKey(orgId, keyId, day);
    const d = this.pendingSpend.get(k);
    if (d) d.microUsd += microUsd;
    else this.pendingSpend.set(k, { orgId, keyId, month: day, microUsd });
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
