import { Injectable } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import type { SqlExecutor } from '../stores/sql/sql-store';
import { DAY_MS, DEFAULT_PARTITION, overlapsDay, PARTITIONS_AHEAD, utcDayStart } from './partition-days';
import { RetentionRepository } from './retention.repository';
import { pruneRollups } from './rollups-retention';
import { TracePartitionsRepository } from './trace-partitions.repository';

/** Rows deleted per statement (feedback, events, rollups, stray traces of the default partition). */
const BATCH = 5_000;

/** What retention lets go: everything created (feedback: last given) before each cutoff; null = kept forever. */
export interface RetentionCutoffs {
  traces: Date;
  feedback: Date | null;
  experimentEvents: Date | null;
  rollups: Date | null;
}

export interface PruneAction {
  target: 'decision_traces' | 'feedback' | 'experiment_events' | 'rollups';
  /** A partition dropped whole, or the table whose old rows are deleted. */
  object: string;
  action: 'drop' | 'delete';
  rows: number;
  /** Bytes on disk of a dropped partition. */
  bytes?: number;
}

export interface PruneReport {
  dryRun: boolean;
  cutoffs: RetentionCutoffs;
  actions: PruneAction[];
  /**
   * This run stopped where it was: another replica held the retention lock (the job only: the CLI
   * waits for it), or a partition's table lock was not granted in time. The next run goes on.
   */
  busy: boolean;
}

export interface EnsureReport {
  created: string[];
  /** Partitions made for a day the default partition held traces of, with how many moved in. */
  adopted: Array<{ name: string; rows: number }>;
  busy: boolean;
}

export interface SealReport {
  /** Partitions of days that are over whose BRIN indexes had ranges without a summary, with how many. */
  summarized: Array<{ name: string; ranges: number }>;
  busy: boolean;
}

/** A `--before` that would prune inside the learning window. */
export class RetentionBoundError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RetentionBoundError';
  }
}

/** One step under the retention lock; 'busy' when another replica held it. */
type Step = <T>(fn: (tx: SqlExecutor) => Promise<T>) => Promise<T | 'busy'>;

const daysBefore = (now: number, days: number | null): Date | null => (days === null ? null : new Date(now - days * DAY_MS));

/**
 * Retention (docs/architecture.md "Retention"): the partitions of `decision_traces` for the coming
 * days, and what goes once it is older than `retention.*` allows — trace partitions dropped whole,
 * feedback, experiment events and rollups deleted by age. The retention job runs it on every
 * replica (one at a time per step, by an advisory lock), `gateway prune` by hand.
 */
@Injectable()
export class RetentionService {
  constructor(
    private readonly partitions: TracePartitionsRepository,
    private readonly aged: RetentionRepository,
    private readonly config: AppConfig,
  ) {}

  /** The latest `--before` that prunes nothing the learning loop reads: the start of its window. */
  floor(now: number): Date {
    return new Date(now - this.config.gateway.learning.window_days * DAY_MS);
  }

  /** The cutoffs of the configured retention at `now`; `tracesBefore` (the CLI's `--before`) replaces the traces' one. */
  cutoffs(now: number, tracesBefore?: Date): RetentionCutoffs {
    const r = this.config.gateway.retention;
    if (tracesBefore) {
      const floor = this.floor(now);
      if (Number.isNaN(tracesBefore.getTime())) throw new RetentionBoundError('--before is not a date (give YYYY-MM-DD or an ISO 8601 time)');
      if (tracesBefore > floor) {
        throw new RetentionBoundError(
          `--before ${tracesBefore.toISOString()} is inside the learning window (learning.window_days = ${this.config.gateway.learning.window_days}): ` +
            `nothing after ${floor.toISOString()} may be pruned`,
        );
      }
    }
    return {
      traces: tracesBefore ?? daysBefore(now, r.traces_days)!,
      feedback: daysBefore(now, r.feedback_days),
      experimentEvents: daysBefore(now, r.lifecycle_events_days),
      rollups: daysBefore(now, r.rollups_days),
    };
  }

  /**
   * Makes sure each UTC day from today to PARTITIONS_AHEAD days ahead has its partition (a day the
   * old table's partition covers needs none). A day the default partition already holds traces of
   * is made with those traces moved in.
   */
  async ensurePartitions(now: number, wait: boolean): Promise<EnsureReport> {
    const report: EnsureReport = { created: [], adopted: [], busy: false };
    const ranges = (await this.partitions.list()).flatMap((p) => (p.bound?.kind === 'range' ? [p.bound] : []));
    const today = utcDayStart(now);
    for (let day = today; day <= today + PARTITIONS_AHEAD * DAY_MS; day += DAY_MS) {
      if (ranges.some((b) => overlapsDay(b, day))) continue;
      const made = await this.partitions.locked(wait, async (tx) => {
        const r = await this.partitions.createDay(tx, day);
        return r === 'occupied' ? { adopted: await this.partitions.adoptDay(tx, day) } : r;
      });
      if (made === 'busy') return { ...report, busy: true };
      const name = `decision_traces_p${new Date(day).toISOString().slice(0, 10).replace(/-/g, '')}`;
      if (made === 'created') report.created.push(name);
      else if (typeof made === 'object') report.adopted.push({ name, rows: made.adopted });
    }
    return report;
  }

  /**
   * Seals the partitions of days that are over: summarizes the page ranges their BRIN indexes left
   * without a summary (TracePartitionsRepository.summarize), so a read by txid or id skips those days
   * whole. Never today's: its last range is still filling, and a summarized range makes every insert
   * into it widen the summary.
   */
  async sealPartitions(now: number, wait: boolean): Promise<SealReport> {
    const report: SealReport = { summarized: [], busy: false };
    for (const p of await this.partitions.list()) {
      if (p.bound?.kind !== 'range' || p.bound.to === null || p.bound.to > now) continue;
      const ranges = await this.partitions.locked(wait, (tx) => this.partitions.summarize(tx, p.name));
      if (ranges === 'busy') return { ...report, busy: true };
      if (ranges > 0) report.summarized.push({ name: p.name, ranges });
    }
    return report;
  }

  /**
   * Lets go of what is past retention (`dryRun`: only reports it). Trace partitions whose whole day
   * is before the cutoff are dropped; traces before it in the default partition are deleted.
   */
  async prune(o: { now: number; before?: Date; dryRun: boolean; wait: boolean }): Promise<PruneReport> {
    const cutoffs = this.cutoffs(o.now, o.before);
    const report: PruneReport = { dryRun: o.dryRun, cutoffs, actions: [], busy: false };
    const step: Step = async (fn) => {
      const r = await this.partitions.locked(o.wait, fn);
      if (r === 'busy') report.busy = true;
      return r;
    };

    for (const p of await this.partitions.list()) {
      if (report.busy) return report;
      if (p.bound?.kind !== 'range' || p.bound.to === null || p.bound.to > cutoffs.traces.getTime()) continue;
      const size = await this.partitions.measure(p.name);
      if (!o.dryRun && (await step((tx) => this.partitions.drop(tx, p.name))) === 'busy') return report;
      report.actions.push({ target: 'decision_traces', object: p.name, action: 'drop', ...size });
    }

    const stray = await this.partitions.measure(DEFAULT_PARTITION, cutoffs.traces);
    if (stray.rows > 0) {
      const rows = o.dryRun ? stray.rows : await this.batches(step, (tx) => this.partitions.deleteFromDefault(tx, cutoffs.traces, BATCH));
      if (report.busy) return report;
      report.actions.push({ target: 'decision_traces', object: DEFAULT_PARTITION, action: 'delete', rows });
    }

    for (const [table, cutoff] of [['feedback', cutoffs.feedback], ['experiment_events', cutoffs.experimentEvents]] as const) {
      if (!cutoff) continue;
      const old = await this.aged.countBefore(table, cutoff);
      if (old === 0) continue;
      const rows = o.dryRun ? old : await this.batches(step, (tx) => this.aged.deleteBefore(tx, table, cutoff, BATCH));
      if (report.busy) return report;
      report.actions.push({ target: table, object: table, action: 'delete', rows });
    }

    if (cutoffs.rollups) {
      const totals = new Map<string, number>();
      for (;;) {
        const r = await step((tx) => pruneRollups(tx, cutoffs.rollups!, BATCH, o.dryRun));
        if (r === 'busy') return report;
        for (const t of r) totals.set(t.table, (totals.get(t.table) ?? 0) + t.rows);
        if (o.dryRun || r.every((t) => t.rows < BATCH)) break;
      }
      for (const [table, rows] of totals) if (rows > 0) report.actions.push({ target: 'rollups', object: table, action: 'delete', rows });
    }
    return report;
  }

  /** Runs a batch delete until a batch comes back short (or the lock is busy); the total deleted. */
  private async batches(step: Step, batch: (tx: SqlExecutor) => Promise<number>): Promise<number> {
    let total = 0;
    for (;;) {
      const n = await step(batch);
      if (n === 'busy') return total;
      total += n;
      if (n < BATCH) return total;
    }
  }
}
