import { BeforeApplicationShutdown, Injectable, OnApplicationBootstrap, Optional } from '@nestjs/common';
import type { Logger } from 'pino';
import { Counter } from 'prom-client';
import { Periodic } from '../common/lifecycle/periodic';
import { AppLogger } from '../common/logging/logger';
import { stripUndefined } from '../common/options';
import { MetricsService } from '../metrics/metrics.service';
import { StoreFallback } from '../resilience/store-fallback';
import { EnsureReport, PruneReport, RetentionService, SealReport } from './retention.service';

export class RetentionJobOptions {
  /** How often the job looks; 0 turns the timer off (run() still works). */
  intervalMs?: number;
  /** The first run comes this long after start-up (0: none before the first beat). */
  firstRunDelayMs?: number;
  /** How long shutdown waits for a run in progress. */
  shutdownTimeoutMs?: number;
  now?: () => number;
}

/*
 * Hourly, though its work is daily (a new day's partition, a day past retention): a replica started
 * just before midnight, or one whose run found the lock busy or the store down, catches up within
 * the hour, and a run with nothing to do costs two catalog reads.
 */
const DEFAULTS = { intervalMs: 3_600_000, firstRunDelayMs: 60_000, shutdownTimeoutMs: 5_000 };

export interface RetentionRun {
  outcome: 'done' | 'skipped' | 'failed';
  partitions?: EnsureReport;
  pruned?: PruneReport;
  sealed?: SealReport;
}

/**
 * The retention job (docs/architecture.md "Retention"): a minute after start-up and then hourly, on every
 * replica, it makes the coming days' trace partitions, prunes what is past `retention.*`, and seals
 * the partitions of days that are over (RetentionService.sealPartitions). An
 * advisory lock lets one replica do each step; the others skip it (`skipped`).
 */
@Injectable()
export class RetentionJob implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly o: typeof DEFAULTS;
  private readonly now: () => number;
  private readonly log: Logger;
  private readonly runs: Counter<'outcome'>;
  private readonly periodic = new Periodic(() => this.once());
  private firstRun: NodeJS.Timeout | undefined;

  constructor(
    private readonly retention: RetentionService,
    private readonly fallback: StoreFallback,
    logger: AppLogger,
    metrics: MetricsService,
    @Optional() options?: RetentionJobOptions,
  ) {
    const given = stripUndefined(options);
    this.o = { ...DEFAULTS, ...given } as typeof DEFAULTS;
    this.now = given.now ?? Date.now;
    this.log = logger.pino;
    this.runs = new Counter({
      name: 'gateway_retention_runs_total',
      help: 'Retention job runs by outcome (done, skipped = another replica held the lock, failed)',
      labelNames: ['outcome'] as const,
      registers: [metrics.registry],
    });
  }

  onApplicationBootstrap(): void {
    // A minute in, not at once: start-up (migrations, seeding, the first snapshot) has the store to
    // itself, and nothing is urgent (partitions are made a week ahead; a trace whose day has none
    // waits in the default partition until its day is made).
    if (this.o.firstRunDelayMs > 0) {
      this.firstRun = setTimeout(() => void this.run(), this.o.firstRunDelayMs);
      this.firstRun.unref();
    }
    this.periodic.start(this.o.intervalMs);
  }

  async beforeApplicationShutdown(): Promise<void> {
    clearTimeout(this.firstRun);
    await this.periodic.stop(this.o.shutdownTimeoutMs);
  }

  /** One run; never rejects. A call during a run waits for it and runs again. */
  run(): Promise<RetentionRun> {
    return this.periodic.run();
  }

  private async once(): Promise<RetentionRun> {
    let run: RetentionRun;
    try {
      const now = this.now();
      const partitions = await this.retention.ensurePartitions(now, false);
      const pruned = partitions.busy ? undefined : await this.retention.prune({ now, dryRun: false, wait: false });
      // After the prune: a day about to be dropped needs no sealing.
      const sealed = partitions.busy || pruned?.busy ? undefined : await this.retention.sealPartitions(now, false);
      run = { outcome: partitions.busy || pruned?.busy || sealed?.busy ? 'skipped' : 'done', partitions, pruned, sealed };
      this.report(run);
    } catch (err) {
      run = { outcome: 'failed' };
      this.fallback.failed('analytics', 'retention', err, { effect: 'retried next run' });
    }
    this.runs.inc({ outcome: run.outcome });
    return run;
  }

  private report(run: RetentionRun): void {
    const { partitions: p, pruned, sealed } = run;
    const created = p?.created ?? [];
    const adopted = p?.adopted ?? [];
    const actions = pruned?.actions ?? [];
    const summarized = sealed?.summarized ?? [];
    if (created.length + adopted.length + actions.length + summarized.length === 0) return;
    this.log.info(
      {
        topic: 'retention',
        created,
        adopted,
        dropped: actions.filter((a) => a.action === 'drop').map((a) => ({ partition: a.object, rows: a.rows, bytes: a.bytes })),
        deleted: actions.filter((a) => a.action === 'delete').map((a) => ({ table: a.object, rows: a.rows })),
        summarized,
      },
      'retention: partitions made or sealed, old rows pruned',
    );
  }
}
