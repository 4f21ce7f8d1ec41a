/**
 * The readings of the raw traces that the rollups replaced, kept as the oracles of the rollup tests
 * (the learning loop's own full recompute is ModelStatsRepository.recomputeFromTraces):
 *   - the stop rules' per-arm figures of one experiment, from its traces and their sessions' feedback;
 *   - the regression detector's figures per (org, provider, model), from the traces and feedback of
 *     the learning window, the rolling window given by its start.
 */
import type { ArmStats, ExperimentStats } from '../../src/experiments/experiment-stats.repository';
import type { SqlExecutor } from '../../src/stores/sql/sql-store';

/* $1 experiment id, $2 organisation, $3 start of the experiment. */
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

interface ArmRow {
  arm: 'baseline' | 'candidate';
  feedback_sessions: number;
  score_mean: number | null;
  useful_rate: number | null;
  requests: number;
  errors: number;
  latency_p50_ms: number | null;
  cost_mean_usd: number | null;
}

const num = (v: number | string | null): number | null => (v === null ? null : Number(v));

export async function experimentStatsFromTraces(sql: SqlExecutor, e: { id: string; orgId: string; startedAt: Date }): Promise<ExperimentStats> {
  const { rows } = await sql.query<ArmRow>(ARM_STATS, [e.id, e.orgId, e.startedAt.toISOString()]);
  const of = (arm: 'baseline' | 'candidate'): ArmStats => {
    const r = rows.find((x) => x.arm === arm)!;
    return {
      feedbackSessions: Number(r.feedback_sessions),
      scoreMean: num(r.score_mean),
      usefulRate: num(r.useful_rate),
      requests: Number(r.requests),
      errors: Number(r.errors),
      latencyP50Ms: num(r.latency_p50_ms),
      costMeanUsd: num(r.cost_mean_usd),
    };
  };
  return { baseline: of('baseline'), candidate: of('candidate') };
}

/* $1 long-run start, $2 rolling start, $3 / $4 outcome weights. */
const QUALITY_FIGURES = `
  WITH attributed AS (
    SELECT DISTINCT t.org_id, t.session_id, t.selected_provider AS provider, t.selected_model AS model
    FROM decision_traces t
    WHERE t.created_at >= $1::timestamptz AND t.endpoint IN ('chat', 'responses') AND t.status BETWEEN 200 AND 299
      AND t.session_id IS NOT NULL AND t.selected_provider IS NOT NULL AND t.selected_model IS NOT NULL
  ),
  samples AS (
    SELECT a.org_id, a.provider, a.model, f.updated_at,
           $3::float8 * (f.score::float8 / 10) + $4::float8 * (CASE WHEN f.useful THEN 1.0::float8 ELSE 0.0::float8 END) AS y
    FROM attributed a
    JOIN feedback f ON f.org_id = a.org_id AND f.session_id = a.session_id
    WHERE f.updated_at >= $1::timestamptz
  )
  SELECT org_id, provider, model,
         count(*)::int AS long_n,
         avg(y) AS long_mean,
         (count(*) FILTER (WHERE updated_at >= $2::timestamptz))::int AS rolling_n,
         avg(y) FILTER (WHERE updated_at >= $2::timestamptz) AS rolling_mean
  FROM samples
  GROUP BY org_id, provider, model`;

export interface QualityFigures {
  orgId: string;
  provider: string;
  model: string;
  longN: number;
  longMean: number;
  rollingN: number;
  rollingMean: number | null;
}

export async function qualityFiguresFromTraces(
  sql: SqlExecutor,
  p: { longStart: Date; rollingStart: Date; weights: { score: number; useful: number } },
): Promise<QualityFigures[]> {
  const { rows } = await sql.query<{ org_id: string; provider: string; model: string; long_n: number; long_mean: number; rolling_n: number; rolling_mean: number | null }>(
    QUALITY_FIGURES,
    [p.longStart.toISOString(), p.rollingStart.toISOString(), p.weights.score, p.weights.useful],
  );
  return rows.map((r) => ({
    orgId: r.org_id,
    provider: r.provider,
    model: r.model,
    longN: Number(r.long_n),
    longMean: Number(r.long_mean),
    rollingN: Number(r.rolling_n),
    rollingMean: num(r.rolling_mean),
  }));
}
