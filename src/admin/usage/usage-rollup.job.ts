import { BeforeApplicationShutdown, Injectable, OnApplicationBootstrap, Optional } from '@nestjs/common';
import { Counter } from 'prom-client';
import { Periodic } from '../../common/lifecycle/periodic';
import { stripUndefined } from '../../common/options';
import { AppConfig } from '../../config/app-config';
import type { BackfillLimits } from '../../learning/rollups/rollup-state';
import { MetricsService } from '../../metrics/metrics.service';
import { StoreFallback } from '../../resilience/store-fallback';
import type { UsageRollupsView } from './usage-rollup';
import { UsageRollupRepository } from './usage-rollup.repository';

export class UsageRollupJobOptions {
  /** Failures are logged at most once per this interval. */
  logIntervalMs?: number;
  /** How long shutdown waits for a run in progress. */
  shutdownTimeoutMs?: number;
  /** How much backfill one beat takes on (the bench takes larger chunks). */
  backfill?: BackfillLimits;
}

const DEFAULTS = { logIntervalMs: 30_000, shutdownTimeoutMs: 5_000 };
/**
 * At most this share of the time goes to the rollups: a steady beat costs what arrived since the
 * last one, far below it; it bounds the beats that take on backfill chunks (a second each) while a
 * first start or a rebuild takes in the traces already stored.
 */
const MAX_DUTY = 0.1;
/**
 * A beat rewrites the open hour's and day's rows whatever arrived (their histograms are merged whole):
 * beating at most once a minute keeps that cost small, and readers lose nothing by it (what a beat has
 * not taken in yet they read from decision_traces).
 */
const MIN_INTERVAL_SECONDS = 60;

export interface UsageRollupRun {
  /** `failed`: the store refused or timed out; nothing changed (one transaction), the next beat tries again. */
  outcome: UsageRollupsView | 'failed';
}

/**
 * The usage rollups' beat (docs/architecture.md "Usage from rollups"): every
 * `learning.refresh_seconds` but at most once a minute, on every replica, the traces written since
 * the last beat are taken into usage_rollups (one replica at a time: the rollups' advisory lock). Readers never wait for it:
 * what it has not taken in yet they read from decision_traces.
 */
@Injectable()
export class UsageRollupJob implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly o: typeof DEFAULTS & { backfill?: BackfillLimits };
  private readonly fallback: StoreFallback;
  private readonly runs: Counter<'outcome'>;
  private readonly periodic = new Periodic(() => this.once());
  /** Before this (ms since epoch) beats are skipped (MAX_DUTY). */
  private dueAt = 0;

  constructor(
    private readonly repo: UsageRollupRepository,
    private readonly config: AppConfig,
    metrics: MetricsService,
    fallback: StoreFallback,
    @Optional() options?: UsageRollupJobOptions,
  ) {
    this.o = { ...DEFAULTS, ...stripUndefined(options) };
    this.fallback = fallback.withLogInterval(this.o.logIntervalMs);
    this.runs = new Counter({
      name: 'gateway_usage_rollup_runs_total',
      help: 'Usage rollup beats by outcome (done, backfilling = a backfill is still under way, failed)',
      labelNames: ['outcome'] as const,
      registers: [metrics.registry],
    });
  }

  onApplicationBootstrap(): void {
    const seconds = Math.max(this.config.gateway.learning.refresh_seconds, MIN_INTERVAL_SECONDS);
    this.periodic.start(seconds * 1000, () => (Date.now() >= this.dueAt ? this.run() : Promise.resolve()));
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.periodic.stop(this.o.shutdownTimeoutMs);
  }

  /** One beat; never rejects. A call during a beat waits for it and beats again. */
  run(): Promise<UsageRollupRun> {
    return this.periodic.run();
  }

  private async once(): Promise<UsageRollupRun> {
    const started = Date.now();
    let outcome: UsageRollupRun['outcome'];
    try {
      outcome = await this.repo.catchUp(this.o.backfill);
    } catch (err) {
      outcome = 'failed';
      this.fallback.failed('analytics', 'usage:rollups', err, { effect: 'usage read from decision_traces until the next beat' });
    }
    this.dueAt = started + (Date.now() - started) / MAX_DUTY;
    this.runs.inc({ outcome: outcome === 'failed' ? 'failed' : outcome.complete ? 'done' : 'backfilling' });
    return { outcome };
  }
}
