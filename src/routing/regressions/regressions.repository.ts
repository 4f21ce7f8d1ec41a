import { Injectable } from '@nestjs/common';
import { SqlStore } from '../../stores/sql/sql-store';
import type { RegressionRecord } from './regressions-view';

interface RegressionRow {
  org_id: string;
  provider: string;
  model: string;
  reason: string;
  created_at: Date | string;
}

const toRecord = (r: RegressionRow): RegressionRecord => ({
  orgId: r.org_id,
  provider: r.provider,
  model: r.model,
  reason: r.reason,
  createdAt: new Date(r.created_at),
});

const INSERT = `
  INSERT INTO regressions (org_id, provider, model, reason, detail) VALUES ($1, $2, $3, $4, $5::jsonb)
  RETURNING org_id, provider, model, reason, created_at`;

/* The 7-day tail of every organisation, for the in-memory view: regressions are rare events, so this stays small. */
const LIST_SINCE = `
  SELECT org_id, provider, model, reason, created_at FROM regressions
  WHERE created_at >= $1::timestamptz ORDER BY created_at DESC, id DESC`;

/* One replica detects per beat (the others skip); COMMIT or ROLLBACK releases the lock. */
const TRY_LOCK = `SELECT pg_try_advisory_xact_lock(hashtext('routing-gateway:regressions')) AS locked`;

/*
 * The quality-drop detector (docs/architecture.md "Regressions"), in one statement. Samples are attributed to the
 * models that served a session exactly as the learning job does (README "Learning loop": a session
 * whose feedback was last given in the window, for each (provider, model) that answered one of its
 * chat requests (chat completions or Responses) successfully), with y = w_s·(score/10) + w_u·useful. Per (org, provider, model):
 *   long-run = every sample of the learning window ($1 seconds), rolling = those of the last $2 seconds.
 * A regression is recorded when rolling_mean < long_run_mean − margin ($6), the rolling window has at
 * least $5 samples and so does the part of the long run before it; and not again while a
 * `quality_drop` of the pair is younger than the rolling window (one per episode, not one per beat).
 * $3, $4: outcome weights (learning.weights).
 */
const DETECT_QUALITY_DROPS = `
  WITH win AS (
    SELECT now() - $1::float8 * interval '1 second' AS long_start,
           now() - $2::float8 * interval '1 second' AS rolling_start
  ),
  attributed AS (
    SELECT DISTINCT t.org_id, t.session_id, t.selected_provider AS provider, t.selected_model AS model
    FROM decision_traces t CROSS JOIN win
    WHERE t.created_at >= win.long_start AND t.endpoint IN ('chat', 'responses') AND t.status BETWEEN 200 AND 299
      AND t.session_id IS NOT NULL AND t.selected_provider IS NOT NULL AND t.selected_model IS NOT NULL
  ),
  samples AS (
    SELECT a.org_id, a.provider, a.model, f.updated_at,
           $3::float8 * (f.score::float8 / 10) + $4::float8 * (CASE WHEN f.useful THEN 1.0::float8 ELSE 0.0::float8 END) AS y
    FROM attributed a
    JOIN feedback f ON f.org_id = a.org_id AND f.session_id = a.session_id
    CROSS JOIN win
    WHERE f.updated_at >= win.long_start
  ),
  agg AS (
    SELECT s.org_id, s.provider, s.model,
           count(*) AS long_n,
           avg(s.y) AS long_mean,
           count(*) FILTER (WHERE s.updated_at >= win.rolling_start) AS rolling_n,
           avg(s.y) FILTER (WHERE s.updated_at >= win.rolling_start) AS rolling_mean
    FROM samples s CROSS JOIN win
    GROUP BY s.org_id, s.provider, s.model
  )
  INSERT INTO regressions (org_id, provider, model, reason, detail)
  SELECT a.org_id, a.provider, a.model, 'quality_drop',
         jsonb_build_object('rolling_mean', a.rolling_mean, 'long_run_mean', a.long_mean,
                            'rolling_n', a.rolling_n, 'long_run_n', a.long_n, 'margin', $6::float8)
  FROM agg a CROSS JOIN win
  WHERE a.rolling_n >= $5 AND a.long_n - a.rolling_n >= $5
    AND a.rolling_mean < a.long_mean - $6::float8
    AND NOT EXISTS (
      SELECT 1 FROM regressions r
      WHERE r.org_id = a.org_id AND r.provider = a.provider AND r.model = a.model
        AND r.reason = 'quality_drop' AND r.created_at >= win.rolling_start)
  RETURNING org_id, provider, model, reason, created_at`;

export interface QualityDropParams {
  /** The long run: the learning window (`learning.window_days`), in seconds. */
  longRunSeconds: number;
  /** The rolling window (`routing.regressions.rolling_hours`), in seconds. */
  rollingSeconds: number;
  weights: { score: number; useful: number };
  /** Samples needed in the rolling window and in the long run before it. */
  minSamples: number;
  margin: number;
}

/** The `regressions` table (0001_initial.sql): every SQL statement of the regression record. */
@Injectable()
export class RegressionsRepository {
  constructor(private readonly sql: SqlStore) {}

  async insert(orgId: string, provider: string, model: string, reason: string, detail: Record<string, unknown> | null): Promise<RegressionRecord> {
    const { rows } = await this.sql.query<RegressionRow>(INSERT, [orgId, provider, model, reason, detail === null ? null : JSON.stringify(detail)]);
    return toRecord(rows[0]);
  }

  /** Every regression recorded at or after `since`, newest first. */
  async listSince(since: Date): Promise<RegressionRecord[]> {
    const { rows } = await this.sql.query<RegressionRow>(LIST_SINCE, [since.toISOString()]);
    return rows.map(toRecord);
  }

  /** Records the quality drops found now; `skipped` when another replica holds the detector's lock. */
  async detectQualityDrops(p: QualityDropParams): Promise<RegressionRecord[] | 'skipped'> {
    return this.sql.transaction(async (tx) => {
      const { rows } = await tx.query<{ locked: boolean }>(TRY_LOCK, []);
      if (!rows[0]?.locked) return 'skipped';
      const inserted = await tx.query<RegressionRow>(DETECT_QUALITY_DROPS, [
        p.longRunSeconds, p.rollingSeconds, p.weights.score, p.weights.useful, p.minSamples, p.margin,
      ]);
      return inserted.rows.map(toRecord);
    });
  }
}
