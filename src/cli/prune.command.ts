import { Command, InvalidArgumentError } from 'commander';
import type { AppConfig } from '../config/app-config';
import { PruneReport, RetentionBoundError, RetentionService } from '../retention/retention.service';

/** `--before`: a UTC day (YYYY-MM-DD, its 00:00 UTC) or an ISO 8601 time with its offset. */
function beforeArg(value: string): Date {
  const day = /^(\d{4})-(\d{2})-(\d{2})$/.exec(value);
  const at = day ? new Date(Date.UTC(Number(day[1]), Number(day[2]) - 1, Number(day[3]))) : new Date(value);
  if (Number.isNaN(at.getTime()) || (!day && !/(Z|[+-]\d{2}:?\d{2})$/i.test(value))) {
    throw new InvalidArgumentError('give a UTC day (YYYY-MM-DD) or an ISO 8601 time with its offset (e.g. 2026-01-31T12:00:00Z)');
  }
  return at;
}

const MIB = 1024 * 1024;

/** The report as lines: per kind of row its cutoff and what goes (or went). */
export function formatPruneReport(r: PruneReport, config: AppConfig, before?: Date): string {
  const ret = config.gateway.retention;
  const lines: string[] = [];
  const section = (target: string, cutoff: Date | null, setting: string, value: number | null) => {
    if (!cutoff) {
      lines.push(`${target}: kept (${setting} is null)`);
      return;
    }
    lines.push(`${target}: before ${cutoff.toISOString()} (${setting}${value === null ? '' : ` = ${value}`})`);
    const actions = r.actions.filter((a) => a.target === target);
    if (actions.length === 0) lines.push('  nothing to prune');
    for (const a of actions) {
      lines.push(
        a.action === 'drop'
          ? `  drop ${a.object}: ${a.rows} traces, ${((a.bytes ?? 0) / MIB).toFixed(1)} MiB`
          : `  delete ${a.rows} rows of ${a.object}`,
      );
    }
  };
  section('decision_traces', r.cutoffs.traces, before ? '--before' : 'retention.traces_days', before ? null : ret.traces_days);
  section('feedback', r.cutoffs.feedback, 'retention.feedback_days', ret.feedback_days);
  section('experiment_events', r.cutoffs.experimentEvents, 'retention.lifecycle_events_days', ret.lifecycle_events_days);
  section('rollups', r.cutoffs.rollups, 'retention.rollups_days', ret.rollups_days);
  const dropped = r.actions.filter((a) => a.action === 'drop').length;
  const deleted = r.actions.filter((a) => a.action === 'delete').reduce((n, a) => n + a.rows, 0);
  lines.push(r.dryRun ? 'dry run: nothing was changed' : `pruned: ${dropped} partitions dropped, ${deleted} rows deleted`);
  return `${lines.join('\n')}\n`;
}

/**
 * `gateway prune` (README "CLI"): what the retention job does, now, on the configured store; with
 * `--dry-run` only what it would do; with `--before` decision traces are pruned up to that time
 * instead of `retention.traces_days` (never inside the learning window). It waits for a replica's
 * run that holds the retention lock rather than skipping.
 */
export function addPruneCommand(
  program: Command,
  out: (s: string) => void,
  withContext: <T>(fn: (ctx: { retention: RetentionService; config: AppConfig }) => Promise<T>) => Promise<T>,
  fail: (message: string) => Error,
): void {
  program
    .command('prune')
    .description('drop decision-trace partitions and delete feedback, experiment events and rollups past their retention (retention.* in GATEWAY_CONFIG)')
    .option('--dry-run', 'report what would be pruned, change nothing')
    .option('--before <date>', 'prune decision traces created before this UTC day or time instead (no later than the start of the learning window)', beforeArg)
    .action(async (opts: { dryRun?: boolean; before?: Date }) =>
      withContext(async ({ retention, config }) => {
        const now = Date.now();
        try {
          // Refused before anything is touched.
          retention.cutoffs(now, opts.before);
        } catch (err) {
          if (err instanceof RetentionBoundError) throw fail(err.message);
          throw err;
        }
        const report = await retention.prune({ now, before: opts.before, dryRun: opts.dryRun === true, wait: true });
        out(formatPruneReport(report, config, opts.before));
        if (report.busy) throw fail('stopped before the end: a table lock was not granted within 3 s (a long query on decision_traces holds it); run it again');
      }),
    );
}
