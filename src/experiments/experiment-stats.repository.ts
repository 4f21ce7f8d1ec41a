import { Injectable } from '@nestjs/common';
import { percentilesSql } from '../learning/rollups/latency-histogram';
import { SqlStore } from '../stores/sql/sql-store';
import { ExperimentRollups } from './experiment-rollups';
import type { ExperimentArm, ExperimentRecord } from './experiment.record';

/** One arm of one experiment, straight from its decision traces and their sessions' feedback. */
export interface ArmStats {
  /** Sessions with feedback that this arm's own target served successfully at least once. */
  feedbackSessions: number;
  /** Mean feedback score / 10 and share marked useful over those sessions; null when there are none. */
  scoreMean: number | null;
  usefulRate: number | null;
  /** Requests that say something about the arm's target: served by it (2xx or 5xx), or fallen back away from it. */
  requests: number;
  /** Of those, the failures: 5xx, or fallen back away from the arm's target. */
  errors: number;
  /** Over the requests the arm's own target served successfully; null when none (or no cost known). */
  latencyP50Ms: number | null;
  costMeanUsd: number | null;
}

export type ExperimentStats = Record<ExperimentArm, ArmStats>;

interface ArmRow {
  arm: ExperimentArm;
  feedback_sessions: number | string;
  score_mean: number | null;
  useful_rate: number | null;
  requests: number | string;
  errors: number | string;
  latency_p50_ms: number | null;
  cost_mean_usd: number | null;
}

/*
 * Per-arm aggregates of one experiment (docs/architecture.md "Stop rules"), on Postgres and PGlite
 * alike, read from its rollups (experiment-rollups.ts has what they hold), never its traces:
 *   requests, errors   per arm; a 4xx is the client's or the limits' doing (bad request, rate limit,
 *                      client gone), not the target's: it counts neither way; `<arm>_fallback`
 *                      requests are errors of their arm.
 *   feedback sessions  sessions the arm's own target answered successfully at least once, joined to
 *                      their feedback (one row per org and session): their count, mean score / 10
 *                      and share marked useful.
 *   latency p50        percentile_cont(0.5) of the arm's own successful requests, from the latency
 *                      histogram (within 1 %, exact when its bins hold one distinct value each:
 *                      src/learning/rollups/latency-histogram.ts); cost: their exact mean.
 * $1 experiment id.
 */
const ARM_STATS = `
  WITH lat AS (
    SELECT arm, bin, n, total FROM rollup_experiment_latency WHERE experiment_id = $1::uuid AND n > 0
  )
  ${percentilesSql('pct', 'lat', ['arm'], [0.5])}
  SELECT a.arm,
         COALESCE(r.n, 0)::int AS feedback_sessions,
         r.score_sum::float8 / 10 / NULLIF(r.n, 0)::float8 AS score_mean,
         r.useful_sum::float8 / NULLIF(r.n, 0)::float8 AS useful_rate,
         COALESCE(r.requests, 0)::int AS requests, COALESCE(r.errors, 0)::int AS errors,
         pct.p50 AS latency_p50_ms,
         (r.cost_sum / NULLIF(r.cost_n, 0))::float8 AS cost_mean_usd
  FROM (VALUES ('baseline'), ('candidate')) AS a (arm)
  LEFT JOIN rollup_experiment_arms r ON r.experiment_id = $1::uuid AND r.arm = a.arm
  LEFT JOIN pct ON pct.arm = a.arm`;

/** What an arm with nothing taken in yet reads as: no samples, so the stop rule waits. */
const EMPTY: ArmStats = { feedbackSessions: 0, scoreMean: null, usefulRate: null, requests: 0, errors: 0, latencyP50Ms: null, costMeanUsd: null };

const numOrNull = (v: number | string | null): number | null => (v === null ? null : Number(v));

/** The stop-rule job's reads: the experiment rollups (0006_rollups.sql), brought up to date first. */
@Injectable()
export class ExperimentStatsRepository {
  private readonly rollups = new ExperimentRollups();

  constructor(private readonly sql: SqlStore) {}

  /**
   * The experiment's per-arm figures, with every trace and answer committed before the call taken
   * in (the experiment's organisation and start are applied when its traces are taken in). While the
   * rollups' first backfill is under way both arms read as empty: the stop rule waits.
   */
  async armStats(e: Pick<ExperimentRecord, 'id' | 'orgId' | 'startedAt' | 'createdAt'>): Promise<ExperimentStats> {
    const rows = await this.sql.transaction(async (tx) => {
      const view = await this.rollups.catchUp(tx);
      return view.complete ? (await tx.query<ArmRow>(ARM_STATS, [e.id])).rows : null;
    });
    if (rows === null) return { baseline: { ...EMPTY }, candidate: { ...EMPTY } };
    const of = (arm: ExperimentArm): ArmStats => {
      const r = rows.find((x) => x.arm === arm);
      return {
        feedbackSessions: Number(r?.feedback_sessions ?? 0),
        scoreMean: numOrNull(r?.score_mean ?? null),
        usefulRate: numOrNull(r?.useful_rate ?? null),
        requests: Number(r?.requests ?? 0),
        errors: Number(r?.errors ?? 0),
        latencyP50Ms: numOrNull(r?.latency_p50_ms ?? null),
        costMeanUsd: numOrNull(r?.cost_mean_usd ?? null),
      };
    };
    return { baseline: of('baseline'), candidate: of('candidate') };
  }
}
