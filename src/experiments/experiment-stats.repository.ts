import { Injectable } from '@nestjs/common';
import { SqlStore } from '../stores/sql/sql-store';
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
 * Per-arm aggregates of one experiment (docs/architecture.md "Stop rules"), on Postgres and PGlite alike.
 *
 *   t         the experiment's traces. `<arm>_fallback` rows (experiment.router.ts traceArm) belong to
 *             their arm for the error rate only; `own` rows were served (or failed) on the arm's target.
 *             Since the experiment started (5 minutes' margin for clocks: traces carry the replica's
 *             time), so the created_at index bounds the scan.
 *   req       requests and errors per arm. A 4xx is the client's or the limits' doing (bad request,
 *             rate limit, client gone), not the target's: it counts neither way. Latency and cost over
 *             the arm's own successful requests.
 *   sessions  a session is a sample of an arm when the arm's own target answered one of its requests
 *             successfully; a request that fell back across arms makes no sample.
 *   fb        those sessions joined to their feedback (one row per org and session).
 * $1 experiment id, $2 organisation, $3 start of the experiment.
 */
const ARM_STATS = `
  WITH t AS (
    SELECT CASE experiment_arm WHEN 'baseline_fallback' THEN 'baseline' WHEN 'candidate_fallback' THEN 'candidate' ELSE experiment_arm END AS arm,
           experiment_arm IN ('baseline', 'candidate') AS own,
           status BETWEEN 200 AND 299 AS ok,
           status >= 500 AS failed,
           session_id, latency_ms, cost_usd
    FROM decision_traces
    WHERE experiment_id = $1::uuid AND org_id = $2 AND created_at >= $3::timestamptz - interval '5 minutes'
      AND experiment_arm IN ('baseline', 'candidate', 'baseline_fallback', 'candidate_fallback')
  ),
  req AS (
    SELECT arm,
           count(*) FILTER (WHERE NOT own OR ok OR failed) AS requests,
           count(*) FILTER (WHERE NOT own OR failed) AS errors,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY latency_ms) FILTER (WHERE own AND ok) AS latency_p50_ms,
           avg(cost_usd) FILTER (WHERE own AND ok) AS cost_mean_usd
    FROM t GROUP BY arm
  ),
  sessions AS (
    SELECT DISTINCT arm, session_id FROM t WHERE own AND ok AND session_id IS NOT NULL
  ),
  fb AS (
    SELECT s.arm, count(*) AS feedback_sessions,
           avg(f.score::float8 / 10) AS score_mean,
           avg(CASE WHEN f.useful THEN 1.0::float8 ELSE 0.0::float8 END) AS useful_rate
    FROM sessions s JOIN feedback f ON f.org_id = $2 AND f.session_id = s.session_id
    GROUP BY s.arm
  )
  SELECT a.arm,
         COALESCE(fb.feedback_sessions, 0)::int AS feedback_sessions, fb.score_mean::float8 AS score_mean, fb.useful_rate::float8 AS useful_rate,
         COALESCE(req.requests, 0)::int AS requests, COALESCE(req.errors, 0)::int AS errors,
         req.latency_p50_ms::float8 AS latency_p50_ms, req.cost_mean_usd::float8 AS cost_mean_usd
  FROM (VALUES ('baseline'), ('candidate')) AS a (arm)
  LEFT JOIN req ON req.arm = a.arm
  LEFT JOIN fb ON fb.arm = a.arm`;

const numOrNull = (v: number | string | null): number | null => (v === null ? null : Number(v));

/** The stop-rule job's reads of decision traces and feedback (tables of 0001_initial.sql). */
@Injectable()
export class ExperimentStatsRepository {
  constructor(private readonly sql: SqlStore) {}

  async armStats(e: Pick<ExperimentRecord, 'id' | 'orgId' | 'startedAt' | 'createdAt'>): Promise<ExperimentStats> {
    const { rows } = await this.sql.query<ArmRow>(ARM_STATS, [e.id, e.orgId, (e.startedAt ?? e.createdAt).toISOString()]);
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
