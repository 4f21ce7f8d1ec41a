import { keyedMap } from '../../common/own-key';
import { Injectable, OnApplicationBootstrap, OnModuleDestroy, Optional } from '@nestjs/common';
import { Counter, Gauge } from 'prom-client';
import type { Logger } from 'pino';
import { Periodic } from '../../common/lifecycle/periodic';
import { AppLogger } from '../../common/logging/logger';
import { AppConfig } from '../../config/app-config';
import { MetricsService } from '../../metrics/metrics.service';
import { BreakerDecision, BreakerOp, BreakerParams, BreakerPermit, BreakerState, CacheStore } from '../../stores/cache/cache-store';
import { stripUndefined } from '../../common/options';
import { SharedOrLocalCache } from '../shared-or-local-cache';
import { StoreFallback } from '../store-fallback';
import { BreakerCause, BreakerTransition, BreakerTransitions, DEFAULT_TRANSITIONS } from './breaker-transitions';

export type { BreakerPermit, BreakerState } from '../../stores/cache/cache-store';
export type { BreakerCause, BreakerTransition } from './breaker-transitions';

export interface ProviderBreakerState {
  state: BreakerState;
  /** ISO time the open period ends (open) or ended (half-open); absent while closed. */
  openUntil?: string;
  consecutiveFailures: number;
}

/**
 * Tuning of the breakers. The defaults (docs/architecture.md "Circuit breakers"): 5 consecutive failures, or
 * >= 50 % of >= 20 requests in 10 s; open 5 s × 2^(openings−1), capped at 60 s, ±20 % jitter.
 */
export class CircuitBreakerOptions {
  failureThreshold?: number;
  windowMs?: number;
  /** The failure-rate window is kept in this many buckets (10 → 1 s resolution). */
  buckets?: number;
  minRequests?: number;
  failureRatio?: number;
  baseOpenMs?: number;
  maxOpenMs?: number;
  jitter?: number;
  /**
   * A half-open probe holds its lease this long at most, so a replica that crashed mid-probe does
   * not block the provider forever. Default 60 s: the default time to first token of an upstream.
   */
  probeLeaseMs?: number;
  /** State left alone this long is forgotten (closed, openings reset). */
  idleTtlMs?: number;
  /** Uniform in [0, 1): the jitter draw (tests fix it). */
  random?: () => number;
  /** Clock of the local fallback breaker (tests move it). */
  now?: () => number;
  /** Degradation log interval. */
  logIntervalMs?: number;
  /** Successes reported within this long of each other are stepped as one call (see `record`). */
  successBatchMs?: number;
}

const DEFAULTS = {
  failureThreshold: 5,
  windowMs: 10_000,
  buckets: 10,
  minRequests: 20,
  failureRatio: 0.5,
  baseOpenMs: 5_000,
  maxOpenMs: 60_000,
  jitter: 0.2,
  probeLeaseMs: 60_000,
  idleTtlMs: 600_000,
  logIntervalMs: 30_000,
  successBatchMs: 25,
};

const STATE_VALUE: Record<BreakerState, number> = { closed: 0, half_open: 1, open: 2 };
/** Log topic of every cache-store degradation of the breakers. */
const CACHE_TOPIC = 'cache-store:circuit-breaker';

/** Keys of one provider share its hash tag (Redis Cluster; docs/architecture.md "Stateless replicas"). */
export const breakerKey = (providerId: string): string => `cb:{provider:${providerId}}`;

/**
 * Circuit breaker per provider (docs/architecture.md "Circuit breakers"). The state lives in the cache store, changed by
 * one atomic script per step (lua/breaker.lua), so replicas agree on it. When the cache store
 * fails, the per-replica store of SharedOrLocalCache takes over with the same semantics (breaker
 * state stays local), counted in metrics and logged at most once per interval; while the store
 * breaker knows the cache store is down, steps go straight to it. No
 * method ever throws: a breaker that cannot decide lets the request through.
 *
 * It is also routing's BreakerView (docs/architecture.md "The routing chain", step 4): every decision a step returns is kept in
 * memory (which breakers are open, until when), and every `breakers.refresh_seconds` the shared
 * state of each provider is re-read with the read-only `state` step, so breakers other replicas
 * opened show within one beat. The beat runs off the request path: a dead or slow store only
 * leaves the view as this replica last saw it.
 */
@Injectable()
export class CircuitBreakerService implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly o: typeof DEFAULTS & Pick<CircuitBreakerOptions, 'random' | 'now'>;
  private readonly store: SharedOrLocalCache;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly fallback: StoreFallback;
  private readonly log: Logger;
  private readonly stateGauge: Gauge<'provider'>;
  private readonly openings: Counter<'provider'>;
  private readonly localAnswers: Counter<'provider'>;
  /** The view: provider id → end of its open time (ms since the epoch, the deciding store's clock), for open breakers only. */
  private readonly openUntil = new Map<string, number>();
  /**
   * The state gauge's value per provider as last set: set again only when it changes (twice per
   * request otherwise). It is also the state this replica last saw, which `acquire` answers from
   * while it is closed.
   */
  private readonly gaugeValue = new Map<string, number>();
  /** Providers stepped since the current refresh began (refreshes never overlap): a refresh that read before a step must not undo it. */
  private readonly steppedSinceRead = new Set<string>();
  private readonly beat = new Periodic(() => this.readShared());
  /** Per provider, the successes reported since its last batch was stepped, and the batch's end for those who wait on it. */
  private readonly successes = new Map<string, { count: number; done: Promise<void>; settle: () => void }>();
  private successTimer: NodeJS.Timeout | undefined;
  /** Per provider, the last report step issued: each report's step starts after it, so the store sees reports in the order they came. */
  private readonly lastReport = new Map<string, Promise<unknown>>();
  /**
   * Per provider, the last failure report not yet answered. Its answer may open the breaker, and the
   * view shows that only once it comes: until then `acquire` waits for it rather than answer
   * 'allow' from a view the report is about to change.
   */
  private readonly failureInFlight = new Map<string, Promise<void>>();
  private stopped = false;
  /** The changes this replica's own steps made (the Admin API shows them). */
  private readonly transitions: BreakerTransitions;

  constructor(
    shared: CacheStore,
    metrics: MetricsService,
    logger: AppLogger,
    fallback: StoreFallback,
    private readonly config: AppConfig,
    @Optional() options?: CircuitBreakerOptions,
  ) {
    this.o = { ...DEFAULTS, ...stripUndefined(options) };
    this.now = this.o.now ?? Date.now;
    this.random = this.o.random ?? Math.random;
    this.log = logger.pino;
    this.fallback = fallback.withLogInterval(this.o.logIntervalMs);
    this.store = new SharedOrLocalCache(shared, this.fallback, { now: this.now, maxEntries: 10_000 });
    this.transitions = new BreakerTransitions(this.store, { ...DEFAULT_TRANSITIONS, now: this.now });
    this.stateGauge = new Gauge({
      name: 'gateway_circuit_breaker_state',
      help: 'Circuit breaker state per provider as last seen by this replica: 0 closed, 1 half-open, 2 open',
      labelNames: ['provider'] as const,
      registers: [metrics.registry],
    });
    this.openings = new Counter({
      name: 'gateway_circuit_breaker_openings_total',
      help: 'Circuit breaker openings per provider (counted by the replica whose report opened it)',
      labelNames: ['provider'] as const,
      registers: [metrics.registry],
    });
    this.localAnswers = new Counter({
      name: 'gateway_circuit_breaker_local_fallbacks_total',
      help: 'Breaker steps answered by the in-process breaker because the cache store failed',
      labelNames: ['provider'] as const,
      registers: [metrics.registry],
    });
    for (const id of Object.keys(config.gateway.providers)) {
      this.stateGauge.set({ provider: id }, 0);
      this.gaugeValue.set(id, 0);
    }
  }

  /**
   * 'allow' (closed), 'probe' (you hold the half-open probe lease), or 'reject' (open, or half-open
   * with a probe already out). A breaker closed as this replica last saw it is answered here: on a
   * closed breaker the step only reads, and asking the store would put a round trip on every
   * request for the rare one another replica's failures have just opened, which this replica then
   * sees at its next refresh or its own next report (docs/architecture.md "Circuit breakers"). Only
   * an open or half-open breaker is asked, for the probe lease that one replica at a time may hold.
   * While this replica's own failure report for the provider is unanswered, the answer waits for
   * it: that report may be the one that opens the breaker, and a request that came after it must
   * see the opening (a report is bounded by the store's timeout, then stepped locally).
   */
  async acquire(providerId: string): Promise<BreakerPermit> {
    const failure = this.failureInFlight.get(providerId);
    if (failure) await failure;
    if (this.gaugeValue.get(providerId) === STATE_VALUE.closed) return 'allow';
    const d = await this.step(providerId, 'acquire');
    // A breaker that cannot decide must not take a provider out of service.
    return d?.permit ?? 'allow';
  }

  /**
   * Report the attempt's outcome; `probe` = the permit was 'probe'. Only failures that are fallback
   * triggers count (the caller decides). `cause`: the failure (kind and status), kept with the
   * transition when this report opens the breaker. Resolves once the report is stepped.
   *
   * A plain success is gathered with the provider's other successes for `successBatchMs` and
   * stepped as one call that counts each (`repeat`): a report per request would otherwise be a
   * store round trip per request, for a step that on a healthy provider changes nothing anyone
   * reads. Every other report steps at once, after the successes reported before it, so the store
   * sees the reports in their order (a success still resets the run of failures before it).
   */
  record(providerId: string, ok: boolean, probe: boolean, cause?: BreakerCause): Promise<void> {
    if (ok && !probe) return this.addSuccess(providerId);
    const op: BreakerOp = probe ? (ok ? 'probe_success' : 'probe_failure') : 'failure';
    this.stepSuccesses(providerId);
    const stepped = this.report(providerId, () => this.step(providerId, op, ok ? undefined : cause));
    if (!ok) {
      this.failureInFlight.set(providerId, stepped);
      void stepped.then(() => {
        if (this.failureInFlight.get(providerId) === stepped) this.failureInFlight.delete(providerId);
      });
    }
    return stepped;
  }

  /** The provider's recent transitions, newest first (see BreakerTransitions for what each replica sees). */
  recentTransitions(providerId: string, limit: number): Promise<BreakerTransition[]> {
    return this.transitions.recent(providerId, limit);
  }

  /**
   * Gives back a probe lease whose attempt ended with no verdict (the client went away), so the next
   * request probes at once instead of after probeLeaseMs; counts neither a success nor a failure.
   */
  release(providerId: string): Promise<void> {
    return this.report(providerId, () => this.step(providerId, 'probe_release'));
  }

  /** For /health/providers and explain: current state per configured provider id (the successes waiting for their batch stepped first). */
  async states(): Promise<Record<string, ProviderBreakerState>> {
    await this.stepAllSuccesses();
    const ids = Object.keys(this.config.gateway.providers);
    const decisions = await Promise.all(ids.map((id) => this.step(id, 'state')));
    const out = keyedMap<ProviderBreakerState>();
    ids.forEach((id, i) => {
      const d = decisions[i];
      if (!d) out[id] = { state: 'closed', consecutiveFailures: 0 };
      else {
        out[id] = { state: d.state, consecutiveFailures: d.consecutiveFailures };
        if (d.openUntil !== null) out[id].openUntil = new Date(d.openUntil).toISOString();
      }
    });
    return out;
  }

  /** BreakerView: how long the provider's breaker stays open, as this replica last saw it; null when it may be tried. */
  openForMs(providerId: string): number | null {
    const until = this.openUntil.get(providerId);
    if (until === undefined) return null;
    const left = until - this.now();
    return left > 0 ? left : null;
  }

  /**
   * Re-reads every provider's shared breaker into the view (`state` only reads, in the script and in
   * the memory store); never rejects. While the store breaker refuses calls to the cache store the
   * read goes nowhere: the local breaker answers then, and its decisions already reach the view
   * through the steps.
   */
  refreshView(): Promise<void> {
    return this.beat.run();
  }

  /** Not awaited: start-up must not wait on a slow store (the view starts empty: every breaker closed). */
  onApplicationBootstrap(): void {
    void this.beat.run();
    this.beat.start(this.config.gateway.breakers.refresh_seconds * 1000);
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    await this.beat.stop();
    await this.stepAllSuccesses();
    await this.store.close();
  }

  private addSuccess(providerId: string): Promise<void> {
    let batch = this.successes.get(providerId);
    if (!batch) {
      let settle!: () => void;
      const done = new Promise<void>((resolve) => (settle = resolve));
      batch = { count: 0, done, settle };
      this.successes.set(providerId, batch);
    }
    batch.count++;
    this.successTimer ??= setTimeout(() => void this.stepAllSuccesses(), this.o.successBatchMs).unref();
    return batch.done;
  }

  /** Steps the provider's waiting successes, if any, as one call; its promise is the batch's end. */
  private stepSuccesses(providerId: string): Promise<void> {
    const batch = this.successes.get(providerId);
    if (!batch) return Promise.resolve();
    this.successes.delete(providerId);
    const stepped = this.report(providerId, () => this.step(providerId, 'success', undefined, batch.count));
    void stepped.then(batch.settle);
    return stepped;
  }

  private async stepAllSuccesses(): Promise<void> {
    clearTimeout(this.successTimer);
    this.successTimer = undefined;
    await Promise.all([...this.successes.keys()].map((id) => this.stepSuccesses(id)));
  }

  /** Runs a report's step after the provider's previous report's; never rejects (step does not). */
  private report(providerId: string, run: () => Promise<unknown>): Promise<void> {
    const previous = this.lastReport.get(providerId);
    const next = previous ? previous.then(run, run) : run();
    this.lastReport.set(providerId, next);
    void next.then(() => {
      if (this.lastReport.get(providerId) === next) this.lastReport.delete(providerId);
    });
    return next.then(() => undefined);
  }

  private async readShared(): Promise<void> {
    if (this.stopped) return;
    const ids = Object.keys(this.config.gateway.providers);
    this.steppedSinceRead.clear();
    const decisions = await this.store.tryShared(
      (s) => Promise.all(ids.map((id) => s.breaker(breakerKey(id), 'state', this.params()))),
      CACHE_TOPIC,
      { effect: 'breaker view kept as last seen' },
    );
    if (!decisions || this.stopped) return;
    ids.forEach((id, i) => {
      if (!this.steppedSinceRead.has(id)) this.observe(id, decisions[i]);
    });
  }

  /** One step on the shared breaker, else on the local one; undefined when neither answered. */
  private async step(providerId: string, op: BreakerOp, cause?: BreakerCause, repeat?: number): Promise<BreakerDecision | undefined> {
    const key = breakerKey(providerId);
    let d = await this.store.tryShared((s) => s.breaker(key, op, this.params(), undefined, repeat), CACHE_TOPIC, { fallback: 'local breaker' });
    if (!d) {
      this.localAnswers.inc({ provider: providerId });
      try {
        d = await this.store.local.breaker(key, op, this.params(), undefined, repeat);
      } catch (err) {
        this.fallback.warn('circuit-breaker.failed', err, { provider: providerId });
        return undefined;
      }
    }
    this.noteTransition(providerId, op, d, cause);
    this.observe(providerId, d);
    this.steppedSinceRead.add(providerId);
    return d;
  }

  /**
   * The changes this replica's own step made: an opening (with the failure that caused it), the
   * half-open probe it took, the probe's success that closed the breaker.
   */
  private noteTransition(providerId: string, op: BreakerOp, d: BreakerDecision, cause: BreakerCause | undefined): void {
    const to: BreakerState | null = d.opened ? 'open' : op === 'acquire' && d.permit === 'probe' ? 'half_open' : op === 'probe_success' && d.state === 'closed' ? 'closed' : null;
    if (to === null) return;
    // Each change has one state it comes from: a failed probe re-opens a half-open breaker.
    const from: BreakerState = to === 'open' ? (op === 'probe_failure' ? 'half_open' : 'closed') : to === 'half_open' ? 'open' : 'half_open';
    this.transitions.note({
      provider: providerId,
      to,
      from,
      cause: to === 'open' && cause ? { error: cause.error, status: cause.status } : null,
      openUntil: d.openUntil === null ? null : new Date(d.openUntil).toISOString(),
      openings: d.openings,
    });
  }

  private params(): BreakerParams {
    const r = this.random();
    return {
      failureThreshold: this.o.failureThreshold,
      windowMs: this.o.windowMs,
      buckets: this.o.buckets,
      minRequests: this.o.minRequests,
      failureRatio: this.o.failureRatio,
      baseOpenMs: this.o.baseOpenMs,
      maxOpenMs: this.o.maxOpenMs,
      jitter: this.o.jitter,
      random: r >= 0 && r < 1 ? r : 0.5,
      probeLeaseMs: this.o.probeLeaseMs,
      ttlMs: this.o.idleTtlMs,
    };
  }

  private observe(providerId: string, d: BreakerDecision): void {
    const value = STATE_VALUE[d.state];
    if (this.gaugeValue.get(providerId) !== value) {
      this.stateGauge.set({ provider: providerId }, value);
      this.gaugeValue.set(providerId, value);
    }
    if (d.state === 'open' && d.openUntil !== null) this.openUntil.set(providerId, d.openUntil);
    else this.openUntil.delete(providerId);
    if (d.opened) {
      this.openings.inc({ provider: providerId });
      this.log.warn(
        { topic: 'circuit-breaker', provider: providerId, openings: d.openings, open_until: d.openUntil === null ? null : new Date(d.openUntil).toISOString() },
        'circuit breaker opened',
      );
    }
  }
}
