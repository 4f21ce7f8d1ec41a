import { BeforeApplicationShutdown, Injectable, OnApplicationBootstrap, Optional } from '@nestjs/common';
import { Counter } from 'prom-client';
import { Periodic } from '../common/lifecycle/periodic';
import { stripUndefined } from '../common/options';
import { AppConfig } from '../config/app-config';
import { MetricsService } from '../metrics/metrics.service';
import { StoreFallback } from '../resilience/store-fallback';
import { AggregationResult, ModelStatsRepository } from './model-stats.repository';
import { StatsSnapshotService } from './stats-snapshot.service';

export class AggregationJobOptions {
  /** Failures are logged at most once per this interval per kind (aggregation, snapshot). */
  logIntervalMs?: number;
  /** How long shutdown waits for a run in progress. */
  shutdownTimeoutMs?: number;
}

const DEFAULTS = { logIntervalMs: 30_000, shutdownTimeoutMs: 5_000 };
/**
 * At most this share of the time goes to refreshing. A steady refresh costs what arrived since the
 * last one (the rollups, docs/architecture.md "Statistics are derived, never accumulated"), far below
 * this; it bounds the beats that take in a backfill chunk, or a store that is slow. After a refresh
 * that took d, the beat only reloads the snapshot until d/MAX_DUTY has passed since it started.
 */
const MAX_DUTY = 0.05;
const DAY_SECONDS = 86_400;

export interface AggregationRun {
  /** `failed`: the store refused or timed out; the table is unchanged (one transaction). */
  aggregation: AggregationResult | 'failed';
  /** `kept`: the table could not be read; the previous snapshot still serves. */
  snapshot: 'refreshed' | 'kept';
}

/**
 * The learning loop's beat (docs/architecture.md "The learning loop"): every `learning.refresh_seconds`,
 * bring the rollups up to date with the traces and feedback written since the last beat and rewrite
 * `model_stats` from them (ModelStatsRepository.recompute), then reload the in-memory snapshot from
 * it (a beat that comes before MAX_DUTY allows another refresh only reloads). At start-up the
 * snapshot is loaded from the table as it stands. Every replica runs it; the repository's advisory
 * lock lets one refresh per beat, and every replica reloads.
 */
@Injectable()
export class AggregationJob implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly o: typeof DEFAULTS;
  private readonly fallback: StoreFallback;
  private readonly runs: Counter<'outcome'>;
  private readonly periodic = new Periodic(() => this.once());
  /** Before this (ms since epoch) a beat reloads the snapshot without recomputing (MAX_DUTY). */
  private recomputeDueAt = 0;

  constructor(
    private readonly repo: ModelStatsRepository,
    private readonly snapshot: StatsSnapshotService,
    private readonly config: AppConfig,
    metrics: MetricsService,
    fallback: StoreFallback,
    @Optional() options?: AggregationJobOptions,
  ) {
    this.o = { ...DEFAULTS, ...stripUndefined(options) };
    this.fallback = fallback.withLogInterval(this.o.logIntervalMs);
    this.runs = new Counter({
      name: 'gateway_learning_aggregations_total',
      help: 'Aggregation job runs by outcome (done, skipped = another replica held the lock, failed)',
      labelNames: ['outcome'] as const,
      registers: [metrics.registry],
    });
  }

  async onApplicationBootstrap(): Promise<void> {
    // A store that is down at start-up must not stop the gateway: routing starts from an empty
    // snapshot (day zero) and the next beat tries again.
    await this.reload();
    this.periodic.start(this.config.gateway.learning.refresh_seconds * 1000, () => (Date.now() >= this.recomputeDueAt ? this.run() : this.reload()));
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.periodic.stop(this.o.shutdownTimeoutMs);
  }

  /**
   * One recompute and reload; never rejects. A call while a run is in progress waits for it and then
   * runs again, so what was written before the call is always included.
   */
  run(): Promise<AggregationRun> {
    return this.periodic.run();
  }

  private async once(): Promise<AggregationRun> {
    const { window_days, weights } = this.config.gateway.learning;
    let aggregation: AggregationRun['aggregation'];
    try {
      const started = Date.now();
      // The change detector runs in the same beat, on what it takes in (README "Drift: change detection").
      const { latency_target_ms, retry_starved } = this.config.gateway.routing;
      const drift = {
        latencyTargetMs: latency_target_ms,
        starvedAfter: retry_starved.enabled ? { requests: retry_starved.after_requests, seconds: retry_starved.after_seconds } : undefined,
      };
      aggregation = await this.repo.recompute({ windowSeconds: window_days * DAY_SECONDS, weights, drift });
      this.recomputeDueAt = started + (Date.now() - started) / MAX_DUTY;
    } catch (err) {
      aggregation = 'failed';
      this.fallback.failed('analytics', 'learning:aggregation', err, { effect: 'model_stats unchanged' });
    }
    this.runs.inc({ outcome: aggregation });
    return { aggregation, snapshot: await this.reload() };
  }

  private async reload(): Promise<AggregationRun['snapshot']> {
    try {
      const rows = await this.repo.loadAll();
      this.snapshot.replace(rows, new Date());
      return 'refreshed';
    } catch (err) {
      this.fallback.failed('analytics', 'learning:snapshot', err, { effect: 'previous snapshot kept', refreshed_at: this.snapshot.refreshedAt?.toISOString() ?? null });
      return 'kept';
    }
  }
}
