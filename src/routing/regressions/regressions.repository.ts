import { Injectable } from '@nestjs/common';
import { LearningRollups } from '../../learning/rollups/learning-rollups';
import { bucketCeil } from '../../learning/rollups/rollup-state';
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
 * The quality-drop detector (docs/architecture.md "Regressions"), in one statement over the learning
 * rollups (learning-rollups.ts), never the raw traces. Samples are those of the learning loop (README
 * "Feedback and the learning loop": a session whose feedback was last given in the window, for each
 * (provider, model) that answered one of its chat requests (chat completions or Responses)
 * successfully there), with y = w_s·(score/10) + w_u·useful. Per (org, provider, model):
 *   long-run = every sample of the learning window (rollup_window: its sums, whose start is a whole
 *   hour), rolling = those whose feedback was last given in the last $1 seconds, from the start of
 *   that hour rounded up (rollup_sample_hours by feedback_bucket).
 * A regression is recorded when rolling_mean < long_run_mean − margin ($5), the rolling window has at
 * least $4 samples and so does the part of the long run before it; and not again while a
 * `quality_drop` of the pair, or a drop the change detector recorded (`change_detected`, which already
 * restarted the pair's window), is younger than the rolling window (one per episode, not one per beat).
 * $2, $3: outcome weights (learning.weights).
 */
const DETECT_QUALITY_DROPS = `
  WITH win AS (
    SELECT now() - $1::float8 * interval '1 second' AS rolling_start,
           ${bucketCeil("now() - $1::float8 * interval '1 second'")} AS rolling_bucket
  ),
  rolling AS (
    SELECT s.org_id, s.provider, s.model, sum(s.n) AS n, sum(s.score_sum) AS score_sum, sum(s.useful_sum) AS useful_sum
    FROM rollup_sample_hours s CROSS JOIN win
    WHERE s.feedback_bucket >= win.rolling_bucket
    GROUP BY s.org_id, s.provider, s.model
  ),
  agg AS (
    SELECT l.org_id, l.provider, l.model,
           l.n AS long_n,
           ($2::float8 / 10 * l.score_sum::float8 + $3::float8 * l.useful_sum::float8) / l.n::float8 AS long_mean,
           COALESCE(r.n, 0) AS rolling_n,
           ($2::float8 / 10 * r.score_sum::float8 + $3::float8 * r.useful_sum::float8) / NULLIF(r.n, 0)::float8 AS rolling_mean
    FROM rollup_window l
    LEFT JOIN rolling r ON r.org_id = l.org_id AND r.provider = l.provider AND r.model = l.model
    WHERE l.n > 0
  )
  INSERT INTO regressions (org_id, provider, model, reason, detail)
  SELECT a.org_id, a.provider, a.model, 'quality_drop',
         jsonb_build_object('rolling_mean', a.rolling_mean, 'long_run_mean', a.long_mean,
                            'rolling_n', a.rolling_n, 'long_run_n', a.long_n, 'margin', $5::float8)
  FROM agg a CROSS JOIN win
  WHERE a.rolling_n >= $4 AND a.long_n - a.rolling_n >= $4
    AND a.rolling_mean < a.long_mean - $5::float8
    AND NOT EXISTS (
      SELECT 1 FROM regressions r
      WHERE r.org_id = a.org_id AND r.provider = a.provider AND r.model = a.model
        AND r.reason IN ('quality_drop', 'change_detected') AND r.created_at >= win.rolling_start)
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
  private readonly rollups = new LearningRollups();

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

  /**
   * Records the quality drops found now; `skipped` when another replica holds the detector's lock.
   * Brings the learning rollups up to date first (what arrived since their last beat), so the
   * detector sees every trace and answer committed before it ran; none while their first backfill
   * is under way (their sums are partial then).
   */
  async detectQualityDrops(p: QualityDropParams): Promise<RegressionRecord[] | 'skipped'> {
    return this.sql.transaction(async (tx) => {
      const { rows } = await tx.query<{ locked: boolean }>(TRY_LOCK, []);
      if (!rows[0]?.locked) return 'skipped';
      const view = await this.rollups.catchUp(tx, { windowSeconds: p.longRunSeconds });
      if (!view.complete) return [];
      const inserted = await tx.query<RegressionRow>(DETECT_QUALITY_DROPS, [
        p.rollingSeconds, p.weights.score, p.weights.useful, p.minSamples, p.margin,
      ]);
      return inserted.rows.map(toRecord);
    });
  }
}
