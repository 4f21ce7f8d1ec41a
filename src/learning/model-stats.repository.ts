import { Injectable } from '@nestjs/common';
import { SqlStore } from '../stores/sql/sql-store';
import { DRIFT_CUSUM, DriftParams, DriftRepository, epochWindowSql } from './drift/drift.repository';
import { ModelStats } from './model-stats';
import { percentilesSql } from './rollups/latency-histogram';
import { LearningRollups } from './rollups/learning-rollups';
import { bucketCeil, type BackfillLimits } from './rollups/rollup-state';

export interface AggregationParams {
  /** How far back traces and feedback count (config `learning.window_days`), in seconds. */
  windowSeconds: number;
  /** Outcome weights, y = score·(score/10) + useful·[useful] (config `learning.weights`, they sum to 1). */
  weights: { score: number; useful: number };
  /** When the window ends; default the store's clock (tests and the bench move it). */
  at?: Date;
  /** How much of a backfill under way one beat takes on (defaults suit production). */
  backfill?: BackfillLimits;
  /**
   * The change detector's inputs (README "Drift: change detection"): given, the beat runs it on what
   * it took in; left out, the samples wait, unfed, for a beat that runs it.
   */
  drift?: Omit<DriftParams, 'weights'>;
}

/** `done`: the table was recomputed; `skipped`: another replica held the lock and was recomputing it. */
export type AggregationResult = 'done' | 'skipped';

/** The full recompute's window: its start, `now − window` or a start given (the rollups' bucket-aligned one). */
export interface RecomputeParams extends AggregationParams {
  windowStart?: Date;
}

/*
 * Replicas all run the job (no leader: docs/architecture.md "Stateless replicas"). A transaction-scoped advisory lock, tried without
 * waiting, lets one of them refresh while the others skip that beat; COMMIT or ROLLBACK releases
 * it, so a replica that dies holds nothing. The table itself is rewritten whole from the rollups
 * each beat, never added to.
 */
const TRY_LOCK = `SELECT pg_try_advisory_xact_lock(hashtext('routing-gateway:model_stats')) AS locked`;

const CLEAR = 'DELETE FROM model_stats';

/*
 * The full recompute: the whole learning loop in one statement over the raw traces and feedback of
 * the window (the formulas are in README "Feedback and the learning loop"). The beat no longer runs
 * it (its cost grows with the window's traces); it is the oracle the rollups are tested against,
 * and what an operator can compare them with. Given the rollups' bucket-aligned window start, both
 * give the same figures (percentiles within the histogram's 1 %, latency-histogram.ts).
 *
 *   served     traces of the window (created_at ≥ now − window) that name the pair that answered;
 *              ok = status 2xx.
 *   tried      served, plus one row per failed attempt of a trace of the window (its `failed_attempts`:
 *              a target that failed before another served, or every target of a request none
 *              served), each a request of its pair with ok = false and no latency or cost.
 *   attributed one row per (org, session, provider, model) that answered at least one chat request (chat
 *              completions or Responses) of the session successfully. A session served by several pairs gives each of them the
 *              whole sample (weight 1, counted once per pair however many requests it served):
 *              feedback rates the conversation, and there is no telling which answer earned it.
 *   samples    attributed pairs joined to their session's feedback, when that feedback was last given
 *              inside the window (updated_at ≥ now − window). A failed request attributes nothing.
 *   fb, req    grouped per (org, provider, model) and, with GROUPING SETS, per (provider, model)
 *              across organisations: the shared pool, org_id '*' (no real org id can be '*'). fb is
 *              over samples, req over tried: a failed attempt counts as a request, never as feedback.
 *   ep         the latest change point of each pair inside the window (learning_epochs, found by the
 *              change detector, drift/drift.repository.ts): that pair's window starts there, for its
 *              samples (a successful trace and the answer both at or after it) and, from the first
 *              whole hour at or after it, for its requests (the rollups keep those by hour only).
 *
 * Variances are population variances (var_pop): defined from one sample, and for the 0/1 useful flag
 * equal to rate·(1 − rate). Latency percentiles (percentile_cont, linear interpolation) and the mean
 * cost are over successful requests; the success rate is over all requests of the window, failed
 * attempts included.
 * $1 window in seconds, $2 score weight, $3 useful weight, $4 window start (null: now − $1).
 */
const RECOMPUTE = `
  WITH win AS (
    SELECT COALESCE($4::timestamptz, now() - $1::float8 * interval '1 second') AS start
  ),
  ep AS (
    SELECT DISTINCT ON (e.org_id, e.provider, e.model) e.org_id, e.provider, e.model, e.since
    FROM learning_epochs e CROSS JOIN win WHERE e.since > win.start
    ORDER BY e.org_id, e.provider, e.model, e.since DESC
  ),
  served AS (
    SELECT t.org_id, t.session_id, t.endpoint, t.selected_provider AS provider, t.selected_model AS model,
           (t.status BETWEEN 200 AND 299) AS ok, t.latency_ms, t.cost_usd, t.created_at
    FROM decision_traces t CROSS JOIN win
    WHERE t.created_at >= win.start AND t.selected_provider IS NOT NULL AND t.selected_model IS NOT NULL
  ),
  tried_all AS (
    SELECT org_id, provider, model, ok, latency_ms, cost_usd, created_at FROM served
    UNION ALL
    SELECT t.org_id, a.provider, a.model, false, NULL::float8, NULL::float8, t.created_at
    FROM decision_traces t
    CROSS JOIN win
    CROSS JOIN LATERAL jsonb_to_recordset(t.failed_attempts) AS a(provider text, model text)
    WHERE t.created_at >= win.start AND t.failed_attempts IS NOT NULL
      AND a.provider IS NOT NULL AND a.model IS NOT NULL
  ),
  tried AS (
    SELECT x.org_id, x.provider, x.model, x.ok, x.latency_ms, x.cost_usd
    FROM tried_all x LEFT JOIN ep ON ep.org_id = x.org_id AND ep.provider = x.provider AND ep.model = x.model
    WHERE ep.since IS NULL OR x.created_at >= ${bucketCeil('ep.since')}
  ),
  attributed AS (
    SELECT DISTINCT s.org_id, s.session_id, s.provider, s.model, ep.since
    FROM served s LEFT JOIN ep ON ep.org_id = s.org_id AND ep.provider = s.provider AND ep.model = s.model
    WHERE s.ok AND s.endpoint IN ('chat', 'responses') AND s.session_id IS NOT NULL
      AND (ep.since IS NULL OR s.created_at >= ep.since)
  ),
  samples AS (
    SELECT a.org_id, a.provider, a.model, f.score,
           f.score::float8 / 10 AS s,
           CASE WHEN f.useful THEN 1.0::float8 ELSE 0.0::float8 END AS u
    FROM attributed a
    JOIN feedback f ON f.org_id = a.org_id AND f.session_id = a.session_id
    CROSS JOIN win
    WHERE f.updated_at >= GREATEST(win.start, COALESCE(a.since, win.start))
  ),
  fb AS (
    SELECT CASE WHEN GROUPING(org_id) = 1 THEN '*' ELSE org_id END AS org_id, provider, model,
           count(*) AS n,
           avg($2::float8 * s + $3::float8 * u) AS outcome_mean,
           var_pop($2::float8 * s + $3::float8 * u) AS outcome_var,
           avg(s) AS score_mean,
           var_pop(s) AS score_var,
           avg(u) AS useful_rate,
           var_pop(u) AS useful_var,
           count(*) FILTER (WHERE score <= 6) AS nps_detractors,
           count(*) FILTER (WHERE score BETWEEN 7 AND 8) AS nps_passives,
           count(*) FILTER (WHERE score >= 9) AS nps_promoters
    FROM samples
    GROUP BY GROUPING SETS ((org_id, provider, model), (provider, model))
  ),
  req AS (
    SELECT CASE WHEN GROUPING(org_id) = 1 THEN '*' ELSE org_id END AS org_id, provider, model,
           count(*) AS requests,
           (count(*) FILTER (WHERE ok))::float8 / count(*) AS success_rate,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY latency_ms) FILTER (WHERE ok) AS latency_p50_ms,
           percentile_cont(0.9) WITHIN GROUP (ORDER BY latency_ms) FILTER (WHERE ok) AS latency_p90_ms,
           percentile_cont(0.99) WITHIN GROUP (ORDER BY latency_ms) FILTER (WHERE ok) AS latency_p99_ms,
           avg(cost_usd) FILTER (WHERE ok) AS cost_mean_usd
    FROM tried
    GROUP BY GROUPING SETS ((org_id, provider, model), (provider, model))
  )
  INSERT INTO model_stats (
    org_id, provider, model, n, requests, outcome_mean, outcome_var, score_mean, score_var, useful_rate, useful_var,
    success_rate, latency_p50_ms, latency_p90_ms, latency_p99_ms, cost_mean_usd,
    nps_detractors, nps_passives, nps_promoters, window_start, computed_at)
  SELECT COALESCE(r.org_id, f.org_id), COALESCE(r.provider, f.provider), COALESCE(r.model, f.model), COALESCE(f.n, 0), COALESCE(r.requests, 0),
         f.outcome_mean, f.outcome_var, f.score_mean, f.score_var, f.useful_rate, f.useful_var,
         r.success_rate, r.latency_p50_ms, r.latency_p90_ms, r.latency_p99_ms, r.cost_mean_usd,
         COALESCE(f.nps_detractors, 0), COALESCE(f.nps_passives, 0), COALESCE(f.nps_promoters, 0), win.start, now()
  FROM req r
  FULL JOIN fb f ON f.org_id = r.org_id AND f.provider = r.provider AND f.model = r.model
  CROSS JOIN win`;

/*
 * The beat's rewrite of model_stats from the rollups' window sums (learning-rollups.ts): a few rows
 * per (org, provider, model), whatever the traffic. The same figures as RECOMPUTE over the
 * bucket-aligned window: the pool '*' sums every organisation's rows; means and population variances
 * follow from the integer sums (y = a·score + b·useful with a = w_s/10, b = w_u, so Σy and Σy² come
 * from Σscore, Σscore², Σuseful and Σscore·useful, useful² being useful); the success rate over every
 * request; percentiles from the merged latency histogram; the mean cost from its exact sum. A pair
 * with a change point in the window (epochWindowSql) has its figures from that point on; until the
 * first whole hour after the change it may have samples but no requests (no success rate then).
 * $1 score weight, $2 useful weight, $3 window start.
 */
const REWRITE = `
  WITH ${epochWindowSql('$3::timestamptz')},
  k AS (
    SELECT * FROM w
    UNION ALL
    SELECT '*', provider, model, sum(requests), sum(ok), sum(cost_n), sum(cost_sum), sum(n), sum(score_sum), sum(score_sq_sum),
           sum(useful_sum), sum(score_useful_sum), sum(nps_detractors), sum(nps_passives), sum(nps_promoters)
    FROM w GROUP BY provider, model
  ),
  lat AS (
    SELECT org_id, provider, model, bin, n, total FROM wl
    UNION ALL
    SELECT '*', provider, model, bin, sum(n), sum(total) FROM wl GROUP BY provider, model, bin
  )
  ${percentilesSql('pct', 'lat', ['org_id', 'provider', 'model'], [0.5, 0.9, 0.99])},
  m AS (
    SELECT k.*, k.n::float8 AS nf,
           ($1::float8 / 10 * k.score_sum::float8 + $2::float8 * k.useful_sum::float8) / NULLIF(k.n, 0)::float8 AS y_mean,
           (($1::float8 / 10) * ($1::float8 / 10) * k.score_sq_sum::float8 + 2 * ($1::float8 / 10) * $2::float8 * k.score_useful_sum::float8
             + $2::float8 * $2::float8 * k.useful_sum::float8) / NULLIF(k.n, 0)::float8 AS y_sq_mean,
           k.score_sum::float8 / 10 / NULLIF(k.n, 0)::float8 AS s_mean,
           k.score_sq_sum::float8 / 100 / NULLIF(k.n, 0)::float8 AS s_sq_mean,
           k.useful_sum::float8 / NULLIF(k.n, 0)::float8 AS u_mean
    FROM k
  )
  INSERT INTO model_stats (
    org_id, provider, model, n, requests, outcome_mean, outcome_var, score_mean, score_var, useful_rate, useful_var,
    success_rate, latency_p50_ms, latency_p90_ms, latency_p99_ms, cost_mean_usd,
    nps_detractors, nps_passives, nps_promoters, window_start, computed_at)
  SELECT m.org_id, m.provider, m.model, m.n, m.requests,
         m.y_mean, GREATEST(m.y_sq_mean - m.y_mean * m.y_mean, 0), m.s_mean, GREATEST(m.s_sq_mean - m.s_mean * m.s_mean, 0),
         m.u_mean, GREATEST(m.u_mean - m.u_mean * m.u_mean, 0),
         m.ok::float8 / NULLIF(m.requests, 0)::float8, pct.p50, pct.p90, pct.p99,
         (m.cost_sum / NULLIF(m.cost_n, 0))::float8,
         m.nps_detractors, m.nps_passives, m.nps_promoters, $3::timestamptz, now()
  FROM m
  LEFT JOIN pct ON pct.org_id = m.org_id AND pct.provider = m.provider AND pct.model = m.model`;

/*
 * The table, with what the change detector knows of each pair (drift/drift.repository.ts): its latest
 * change point, when it last served a request and how many of its organisation's requests came
 * after, and how far its outcome test's rise statistic is towards an alarm ($1 = DRIFT_CUSUM.h) when
 * its excursion rose steadily, by at least $2 per sample (else 0: an excursion that wanders up by
 * chance, as a stationary one often does, is no reason to follow a model up); while the test is held
 * (a re-try of a starved model, cusum.ts), how far the held test is towards its alarm ($3 = hHeld),
 * and that it is held: routing re-tries it until it decides (at most holdMax answers), following it
 * up while its answers lean to a rise (learned-score.ts retryPick).
 */
/** The rise statistic's mean increase per sample of its excursion that makes it steady (a sample at ≥ 1σ above the reference adds ≥ 0.75). */
export const RISE_STEADY = 0.75;


const LOAD = `
  SELECT m.org_id, m.provider, m.model, m.n, m.requests, m.outcome_mean, m.outcome_var, m.score_mean, m.score_var, m.useful_rate, m.useful_var,
         m.success_rate, m.latency_p50_ms, m.latency_p90_ms, m.latency_p99_ms, m.cost_mean_usd,
         m.nps_detractors, m.nps_passives, m.nps_promoters, m.computed_at,
         e.since AS change_since, e.direction AS change_direction, e.detected_at AS change_detected_at,
         a.last_sample_at AS served_at, (o.requests - a.org_requests_at)::text AS requests_since,
         CASE WHEN jsonb_typeof(d.state -> 'held') = 'object' THEN GREATEST(0, (d.state -> 'held' ->> 's')::float8) / $3::float8
              WHEN (d.state -> 'up' ->> 's')::float8 >= $2::float8 * (d.state -> 'up' ->> 'n')::float8
              THEN (d.state -> 'up' ->> 's')::float8 / $1::float8 ELSE 0 END AS rise_evidence,
         jsonb_typeof(d.state -> 'held') = 'object' AS rise_testing
  FROM model_stats m
  LEFT JOIN LATERAL (
    SELECT since, direction, detected_at FROM learning_epochs x
    WHERE x.org_id = m.org_id AND x.provider = m.provider AND x.model = m.model
    ORDER BY x.since DESC LIMIT 1
  ) e ON true
  LEFT JOIN drift_detectors a ON a.org_id = m.org_id AND a.provider = m.provider AND a.model = m.model AND a.stream = 'auto'
  LEFT JOIN drift_org_requests o ON o.org_id = m.org_id
  LEFT JOIN drift_detectors d ON d.org_id = m.org_id AND d.provider = m.provider AND d.model = m.model AND d.stream = 'outcome'`;

interface ModelStatsRow {
  org_id: string;
  provider: string;
  model: string;
  n: number | string;
  requests: number | string;
  outcome_mean: number | null;
  outcome_var: number | null;
  score_mean: number | null;
  score_var: number | null;
  useful_rate: number | null;
  useful_var: number | null;
  success_rate: number | null;
  latency_p50_ms: number | null;
  latency_p90_ms: number | null;
  latency_p99_ms: number | null;
  cost_mean_usd: number | null;
  nps_detractors: number | string;
  nps_passives: number | string;
  nps_promoters: number | string;
  computed_at: Date | string;
  change_since: Date | string | null;
  change_direction: 'drop' | 'rise' | null;
  change_detected_at: Date | string | null;
  served_at: Date | string | null;
  requests_since: string | null;
  rise_evidence: number | null;
  rise_testing: boolean | null;
}

/*
 * A pair with traces but no feedback yet (n = 0) has no outcome figures: they come out as 0, which
 * carries no weight wherever they are combined with n (n·mean, σ²/(n0 + n) floored).
 */
const orZero = (v: number | null): number => (v === null ? 0 : Number(v));
const orNull = (v: number | null): number | null => (v === null ? null : Number(v));

function toRecord(r: ModelStatsRow): ModelStats {
  return {
    orgId: r.org_id,
    provider: r.provider,
    model: r.model,
    n: Number(r.n),
    outcomeMean: orZero(r.outcome_mean),
    outcomeVar: orZero(r.outcome_var),
    scoreMean: orZero(r.score_mean),
    scoreVar: orZero(r.score_var),
    usefulRate: orZero(r.useful_rate),
    usefulVar: orZero(r.useful_var),
    successRate: orZero(r.success_rate),
    requests: Number(r.requests),
    latencyP50Ms: orNull(r.latency_p50_ms),
    latencyP90Ms: orNull(r.latency_p90_ms),
    latencyP99Ms: orNull(r.latency_p99_ms),
    costMeanUsd: orNull(r.cost_mean_usd),
    npsDetractors: Number(r.nps_detractors),
    npsPassives: Number(r.nps_passives),
    npsPromoters: Number(r.nps_promoters),
    computedAt: new Date(r.computed_at),
    change:
      r.change_since === null || r.change_direction === null
        ? null
        : { since: new Date(r.change_since), direction: r.change_direction, detectedAt: new Date(r.change_detected_at ?? r.change_since) },
    served: r.served_at === null ? null : { lastAt: new Date(r.served_at), requestsSince: Math.max(0, Number(r.requests_since ?? 0)) },
    riseEvidence: r.rise_evidence === null ? 0 : Math.max(0, Number(r.rise_evidence)),
    riseTesting: r.rise_testing === true,
  };
}

/** The aggregates table `model_stats`: refreshed by the aggregation job, read whole by the snapshot. */
@Injectable()
export class ModelStatsRepository {
  private readonly rollups = new LearningRollups();
  private readonly drift = new DriftRepository();

  constructor(private readonly sql: SqlStore) {}

  /**
   * The beat: brings the learning rollups up to date (a cost that follows what arrived since the
   * last beat, learning-rollups.ts) and rewrites the table from their window sums, in one
   * transaction (readers see the old table until it commits). While the rollups' first backfill is
   * under way the table keeps its previous rows.
   */
  async recompute(p: AggregationParams): Promise<AggregationResult> {
    return this.sql.transaction(async (tx) => {
      const { rows } = await tx.query<{ locked: boolean }>(TRY_LOCK, []);
      if (!rows[0]?.locked) return 'skipped';
      const view = await this.rollups.catchUp(tx, { windowSeconds: p.windowSeconds, at: p.at, backfill: p.backfill });
      if (!view.complete || view.windowStart === null) return 'done';
      // The change detector takes in what the rollups just took in, in this transaction (exactly once).
      if (p.drift) await this.drift.step(tx, { ...p.drift, weights: p.weights });
      await this.rollups.syncEpochWindows(tx, view.windowStart);
      await tx.query(CLEAR, []);
      await tx.query(REWRITE, [p.weights.score, p.weights.useful, view.windowStart.toISOString()]);
      return 'done';
    });
  }

  /**
   * The full recompute from the raw traces and feedback (RECOMPUTE), writing the table the same way:
   * the oracle of the rollups' tests, and a check for an operator. Its cost grows with the window's
   * traces; the beat never calls it.
   */
  async recomputeFromTraces(p: RecomputeParams): Promise<AggregationResult> {
    return this.sql.transaction(async (tx) => {
      const { rows } = await tx.query<{ locked: boolean }>(TRY_LOCK, []);
      if (!rows[0]?.locked) return 'skipped';
      await tx.query(CLEAR, []);
      await tx.query(RECOMPUTE, [p.windowSeconds, p.weights.score, p.weights.useful, p.windowStart?.toISOString() ?? null]);
      return 'done';
    });
  }

  async loadAll(): Promise<ModelStats[]> {
    const { rows } = await this.sql.query<ModelStatsRow>(LOAD, [DRIFT_CUSUM.h, RISE_STEADY, DRIFT_CUSUM.hHeld]);
    return rows.map(toRecord);
  }
}
