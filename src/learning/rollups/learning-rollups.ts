import type { SqlExecutor } from '../../stores/sql/sql-store';
import { DRIFT_STATE_NAME, DriftRepository, latestEpochsSql } from '../drift/drift.repository';
import { latencyBinSql } from './latency-histogram';
import {
  backfill,
  BackfillLimits,
  bucketCeil,
  bucketOf,
  maxTxid,
  readState,
  RollupState,
  samePair,
  lock,
  traceCalls,
  writeState,
} from './rollup-state';

/*
 * The learning loop's rollups (docs/architecture.md "Statistics are derived, never accumulated"),
 * shared by the aggregation job (model_stats) and the regression detector. Per (org, provider,
 * model) and hour bucket:
 *
 *   rollup_model_hours   trace-level figures, added once per trace (by its txid, rollup-state.ts):
 *                        requests (traces naming the pair, plus one per failed attempt naming it),
 *                        successes, cost of successes, latency histogram of successes; bucket =
 *                        the hour of the trace's created_at.
 *   rollup_sample_hours  feedback samples: integer sums (score, score², useful, score·useful, NPS);
 *                        bucket = the hour the sample entered the window, i.e. of
 *                        min(last successful chat trace of the pair in the session, feedback
 *                        updated_at), feedback_bucket = the hour of updated_at (the detector's
 *                        rolling window).
 *   rollup_session_pairs the sample each (org, session, provider, model) contributes now. A session
 *                        touched by a new trace or a new answer has its old contribution subtracted
 *                        and its new one added, so late traces, changed answers and a session served
 *                        by several pairs (each gets the whole sample once) count exactly once.
 *   rollup_window        the sums of the buckets in the window [S, now), S = the window start rounded
 *                        up to a whole hour: the oracle, the full recompute from a start aligned the
 *                        same way, gives the same figures.
 *
 * A bucket is "live" while it is ≥ S. Every change to a live bucket goes to rollup_window too; when S
 * moves, the buckets it passes are subtracted from rollup_window and deleted, and contributions that
 * pointed at them are dead (never subtracted again). Traces older than S are not taken in.
 */

/** Beside the txid range, both trace statements keep to the window: created_at ≥ $1 (S). */
const STEADY_TRACES = `t.txid >= $2::bigint AND t.txid < $3::bigint`;
const STEADY_FEEDBACK = `f.txid >= $2::bigint AND f.txid < $3::bigint`;
const BACKFILL_TRACES = `(t.txid IS NULL OR t.txid < $2::bigint) AND t.created_at >= $3::timestamptz AND ($4::timestamptz IS NULL OR t.created_at < $4::timestamptz)`;

/*
 * Trace-level figures of the traces in range. A touched bucket's histogram is rewritten merged with
 * the new latencies (the old one read in the same statement: one writer holds the lock).
 *
 * The traces are read once and grouped straight away (`fine`: per pair, bucket, success and latency
 * bin), and everything after reads those groups: a few rows per pair and hour, whatever the traffic.
 * Each trace counts for the pair that served it and once more for each failed attempt's pair (its
 * calls, `traceCalls`). Materialising the traces themselves instead (a CTE read twice) kept
 * a beat's whole intake in the embedded store's memory, ≈ 11 MiB per 70,000 traces, which its
 * WebAssembly memory never gives back (docs/architecture.md "Statistics are derived, never
 * accumulated").
 */
const tracesSql = (range: string) => `
  WITH fine AS MATERIALIZED (
    SELECT t.org_id, x.provider, x.model, ${bucketOf('t.created_at')} AS bucket, x.served, x.ok,
           CASE WHEN x.ok THEN ${latencyBinSql('x.latency_ms')} END AS bin,
           count(*) AS n, count(t.cost_usd) FILTER (WHERE x.ok) AS cost_n,
           COALESCE(sum(t.cost_usd::numeric) FILTER (WHERE x.ok), 0) AS cost_sum, sum(x.latency_ms::numeric) FILTER (WHERE x.ok) AS total
    FROM decision_traces t CROSS JOIN LATERAL ${traceCalls('t')} AS x
    WHERE ${range} AND t.created_at >= $1::timestamptz
    GROUP BY 1, 2, 3, 4, 5, 6, 7
  ),
  tried AS (
    SELECT * FROM fine WHERE provider IS NOT NULL AND model IS NOT NULL
  ),
  req AS (
    SELECT org_id, provider, model, bucket, sum(n)::bigint AS requests, COALESCE(sum(n) FILTER (WHERE ok), 0)::bigint AS ok,
           sum(cost_n)::bigint AS cost_n, sum(cost_sum) AS cost_sum
    FROM tried GROUP BY org_id, provider, model, bucket
  ),
  lat AS (
    SELECT org_id, provider, model, bucket, bin, sum(n)::bigint AS n, sum(total) AS total
    FROM tried WHERE ok GROUP BY 1, 2, 3, 4, 5
  ),
  merged AS (
    SELECT org_id, provider, model, bucket, array_agg(bin ORDER BY bin) AS bins, array_agg(n ORDER BY bin) AS ns, array_agg(total ORDER BY bin) AS totals
    FROM (
      SELECT org_id, provider, model, bucket, bin, sum(n) AS n, sum(total) AS total
      FROM (
        SELECT org_id, provider, model, bucket, bin, n, total FROM lat
        UNION ALL
        SELECT h.org_id, h.provider, h.model, h.bucket, u.bin, u.n, u.total
        FROM (SELECT DISTINCT org_id, provider, model, bucket FROM lat) k
        -- One primary-key lookup per touched bucket, never a scan of them all.
        CROSS JOIN LATERAL (
          SELECT * FROM rollup_model_hours h
          WHERE h.org_id = k.org_id AND h.provider = k.provider AND h.model = k.model AND h.bucket = k.bucket
        ) h
        CROSS JOIN LATERAL unnest(h.latency_bins, h.latency_n, h.latency_sum) AS u (bin, n, total)
      ) x
      GROUP BY 1, 2, 3, 4, 5
    ) y
    GROUP BY 1, 2, 3, 4
  ),
  hours AS (
    INSERT INTO rollup_model_hours AS h (org_id, provider, model, bucket, requests, ok, cost_n, cost_sum, latency_bins, latency_n, latency_sum)
    SELECT r.org_id, r.provider, r.model, r.bucket, r.requests, r.ok, r.cost_n, r.cost_sum,
           COALESCE(m.bins, '{}'), COALESCE(m.ns, '{}'), COALESCE(m.totals, '{}')
    FROM req r
    LEFT JOIN merged m ON m.org_id = r.org_id AND m.provider = r.provider AND m.model = r.model AND m.bucket = r.bucket
    ON CONFLICT (org_id, provider, model, bucket) DO UPDATE SET
      requests = h.requests + EXCLUDED.requests,
      ok = h.ok + EXCLUDED.ok,
      cost_n = h.cost_n + EXCLUDED.cost_n,
      cost_sum = h.cost_sum + EXCLUDED.cost_sum,
      latency_bins = CASE WHEN EXCLUDED.ok > 0 THEN EXCLUDED.latency_bins ELSE h.latency_bins END,
      latency_n = CASE WHEN EXCLUDED.ok > 0 THEN EXCLUDED.latency_n ELSE h.latency_n END,
      latency_sum = CASE WHEN EXCLUDED.ok > 0 THEN EXCLUDED.latency_sum ELSE h.latency_sum END
    RETURNING 1
  ),
  win AS (
    INSERT INTO rollup_window AS w (org_id, provider, model, requests, ok, cost_n, cost_sum)
    SELECT org_id, provider, model, sum(requests), sum(ok), sum(cost_n), sum(cost_sum) FROM req GROUP BY 1, 2, 3
    ON CONFLICT (org_id, provider, model) DO UPDATE SET
      requests = w.requests + EXCLUDED.requests, ok = w.ok + EXCLUDED.ok, cost_n = w.cost_n + EXCLUDED.cost_n, cost_sum = w.cost_sum + EXCLUDED.cost_sum
    RETURNING 1
  ),
  win_latency AS (
    INSERT INTO rollup_window_latency AS w (org_id, provider, model, bin, n, total)
    SELECT org_id, provider, model, bin, sum(n), sum(total) FROM lat GROUP BY 1, 2, 3, 4
    ON CONFLICT (org_id, provider, model, bin) DO UPDATE SET n = w.n + EXCLUDED.n, total = w.total + EXCLUDED.total
    RETURNING 1
  ),
  -- A pair's window since its change point takes what falls in it too (rollup_epoch_window).
  ep_win AS (
    UPDATE rollup_epoch_window c SET requests = c.requests + x.requests, ok = c.ok + x.ok, cost_n = c.cost_n + x.cost_n, cost_sum = c.cost_sum + x.cost_sum
    FROM (
      SELECT r.org_id, r.provider, r.model, sum(r.requests) AS requests, sum(r.ok) AS ok, sum(r.cost_n) AS cost_n, sum(r.cost_sum) AS cost_sum
      FROM req r JOIN rollup_epoch_window e ON ${samePair('e', 'r')} AND r.bucket >= ${bucketCeil('e.since')}
      GROUP BY 1, 2, 3
    ) x
    WHERE ${samePair('c', 'x')}
    RETURNING 1
  ),
  ep_latency AS (
    INSERT INTO rollup_epoch_window_latency AS w (org_id, provider, model, bin, n, total)
    SELECT l.org_id, l.provider, l.model, l.bin, sum(l.n), sum(l.total)
    FROM lat l JOIN rollup_epoch_window e ON ${samePair('e', 'l')} AND l.bucket >= ${bucketCeil('e.since')}
    GROUP BY 1, 2, 3, 4
    ON CONFLICT (org_id, provider, model, bin) DO UPDATE SET n = w.n + EXCLUDED.n, total = w.total + EXCLUDED.total
    RETURNING 1
  )
  SELECT (SELECT COALESCE(sum(n), 0) FROM fine WHERE served)::int AS traces, (SELECT count(*) FROM hours)::int AS buckets,
         (SELECT count(*) FROM win)::int + (SELECT count(*) FROM win_latency)::int AS window_rows,
         (SELECT count(*) FROM ep_win)::int + (SELECT count(*) FROM ep_latency)::int AS epoch_rows`;

/*
 * Feedback samples. Touched pairs: those with a new successful chat trace (their last trace may
 * move) and every pair of a session whose answer is new. For each, the sample it should contribute
 * now (from its last trace and the session's answer as it stands) replaces the one it contributed.
 * Every read of feedback and rollup_session_pairs is a primary-key lookup per touched row (the
 * lateral subqueries, fenced by OFFSET 0 so the planner keeps them so): a hash join would read those
 * tables whole, a cost that grows with the window's sessions.
 *
 * A sample that exists for the first time (a pair with an answer, not `drift_fed`) goes to the
 * change detector's queue (drift_queue, migration 0015) and its pair is marked `drift_fed`: queued
 * once, whatever the answer does later. `historyFed`: whether a new pair row counts as fed already.
 * Once the change detector has run (it has a state row), a backfill is a rebuild of what it has
 * already seen: a sample the backfill finds is not queued, so the detector, whose tests carry on
 * across a rebuild, does not take the window's sessions in a second time. A pair the backfill finds
 * without an answer is queued when its answer comes, as any new sample is. The first backfill of all
 * (before the detector's first step) queues the window's samples: its reference.
 */
const samplesSql = (traceRange: string, feedbackRange: string, historyFed: string) => `
  WITH nt AS (
    SELECT t.org_id, t.session_id, t.selected_provider AS provider, t.selected_model AS model, max(t.created_at) AS last
    FROM decision_traces t
    WHERE ${traceRange} AND t.created_at >= $1::timestamptz
      AND t.status BETWEEN 200 AND 299 AND t.endpoint IN ('chat', 'responses')
      AND t.session_id IS NOT NULL AND t.selected_provider IS NOT NULL AND t.selected_model IS NOT NULL
    GROUP BY 1, 2, 3, 4
  ),
  touched AS (
    SELECT org_id, session_id, provider, model, max(last) AS last
    FROM (
      SELECT org_id, session_id, provider, model, last FROM nt
      UNION ALL
      SELECT p.org_id, p.session_id, p.provider, p.model, NULL::timestamptz
      FROM (SELECT f.org_id, f.session_id FROM feedback f WHERE ${feedbackRange}) f
      CROSS JOIN LATERAL (
        SELECT p.org_id, p.session_id, p.provider, p.model FROM rollup_session_pairs p
        WHERE p.org_id = f.org_id AND p.session_id = f.session_id OFFSET 0
      ) p
    ) x
    GROUP BY 1, 2, 3, 4
  ),
  cur AS (
    SELECT k.org_id, k.session_id, k.provider, k.model, GREATEST(p.last_trace_at, k.last) AS last_trace_at,
           p.score AS old_score, p.useful AS old_useful, p.bucket AS old_bucket, p.feedback_bucket AS old_feedback_bucket, p.drift_fed AS old_fed,
           f.score, f.useful, f.updated_at
    FROM touched k
    LEFT JOIN LATERAL (
      SELECT p.last_trace_at, p.score, p.useful, p.bucket, p.feedback_bucket, p.drift_fed FROM rollup_session_pairs p
      WHERE p.org_id = k.org_id AND p.session_id = k.session_id AND p.provider = k.provider AND p.model = k.model OFFSET 0
    ) p ON true
    LEFT JOIN LATERAL (
      SELECT f.score, f.useful, f.updated_at FROM feedback f WHERE f.org_id = k.org_id AND f.session_id = k.session_id OFFSET 0
    ) f ON true
  ),
  calc AS (
    SELECT c.*, c.score IS NOT NULL AND NOT c.fed_before AS queue
    FROM (
      SELECT cur.*,
             CASE WHEN score IS NOT NULL THEN ${bucketOf('LEAST(last_trace_at, updated_at)')} END AS bucket,
             CASE WHEN score IS NOT NULL THEN ${bucketOf('updated_at')} END AS feedback_bucket,
             COALESCE(old_fed, ${historyFed}) AS fed_before
      FROM cur
    ) c
  ),
  pairs AS (
    INSERT INTO rollup_session_pairs AS p (org_id, session_id, provider, model, last_trace_at, score, useful, bucket, feedback_bucket, drift_fed)
    SELECT org_id, session_id, provider, model, last_trace_at, score, useful, bucket, feedback_bucket, fed_before OR queue FROM calc
    ON CONFLICT (org_id, session_id, provider, model) DO UPDATE SET
      last_trace_at = EXCLUDED.last_trace_at, score = EXCLUDED.score, useful = EXCLUDED.useful,
      bucket = EXCLUDED.bucket, feedback_bucket = EXCLUDED.feedback_bucket, drift_fed = EXCLUDED.drift_fed
    RETURNING 1
  ),
  queued AS (
    INSERT INTO drift_queue (org_id, session_id, provider, model, last_trace_at)
    SELECT org_id, session_id, provider, model, last_trace_at FROM calc WHERE queue
    ON CONFLICT (org_id, session_id, provider, model) DO NOTHING
    RETURNING 1
  ),
  delta AS (
    SELECT org_id, provider, model, old_bucket AS bucket, old_feedback_bucket AS feedback_bucket, -1 AS sign, old_score::int AS score, old_useful::int AS useful
    FROM calc WHERE old_bucket >= $1::timestamptz
    UNION ALL
    SELECT org_id, provider, model, bucket, feedback_bucket, 1, score::int, useful::int
    FROM calc WHERE bucket >= $1::timestamptz
  ),
  by_bucket AS (
    SELECT org_id, provider, model, bucket, feedback_bucket,
           sum(sign) AS n, sum(sign * score) AS score_sum, sum(sign * score * score) AS score_sq_sum,
           sum(sign * useful) AS useful_sum, sum(sign * score * useful) AS score_useful_sum,
           COALESCE(sum(sign) FILTER (WHERE score <= 6), 0) AS nps_detractors,
           COALESCE(sum(sign) FILTER (WHERE score BETWEEN 7 AND 8), 0) AS nps_passives,
           COALESCE(sum(sign) FILTER (WHERE score >= 9), 0) AS nps_promoters
    FROM delta GROUP BY 1, 2, 3, 4, 5
  ),
  buckets AS (
    INSERT INTO rollup_sample_hours AS s (org_id, provider, model, bucket, feedback_bucket, n, score_sum, score_sq_sum, useful_sum,
                                          score_useful_sum, nps_detractors, nps_passives, nps_promoters)
    SELECT * FROM by_bucket
    ON CONFLICT (org_id, provider, model, bucket, feedback_bucket) DO UPDATE SET
      n = s.n + EXCLUDED.n, score_sum = s.score_sum + EXCLUDED.score_sum, score_sq_sum = s.score_sq_sum + EXCLUDED.score_sq_sum,
      useful_sum = s.useful_sum + EXCLUDED.useful_sum, score_useful_sum = s.score_useful_sum + EXCLUDED.score_useful_sum,
      nps_detractors = s.nps_detractors + EXCLUDED.nps_detractors, nps_passives = s.nps_passives + EXCLUDED.nps_passives,
      nps_promoters = s.nps_promoters + EXCLUDED.nps_promoters
    RETURNING 1
  ),
  win AS (
    INSERT INTO rollup_window AS w (org_id, provider, model, n, score_sum, score_sq_sum, useful_sum, score_useful_sum, nps_detractors, nps_passives, nps_promoters)
    SELECT org_id, provider, model, sum(n), sum(score_sum), sum(score_sq_sum), sum(useful_sum), sum(score_useful_sum),
           sum(nps_detractors), sum(nps_passives), sum(nps_promoters)
    FROM by_bucket GROUP BY 1, 2, 3
    ON CONFLICT (org_id, provider, model) DO UPDATE SET
      n = w.n + EXCLUDED.n, score_sum = w.score_sum + EXCLUDED.score_sum, score_sq_sum = w.score_sq_sum + EXCLUDED.score_sq_sum,
      useful_sum = w.useful_sum + EXCLUDED.useful_sum, score_useful_sum = w.score_useful_sum + EXCLUDED.score_useful_sum,
      nps_detractors = w.nps_detractors + EXCLUDED.nps_detractors, nps_passives = w.nps_passives + EXCLUDED.nps_passives,
      nps_promoters = w.nps_promoters + EXCLUDED.nps_promoters
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM pairs)::int AS pairs, (SELECT count(*) FROM buckets)::int AS buckets, (SELECT count(*) FROM win)::int AS window_rows,
         (SELECT count(*) FROM queued)::int AS queued`;

const TRACES_STEADY = tracesSql(STEADY_TRACES);
const TRACES_BACKFILL = tracesSql(BACKFILL_TRACES);
const SAMPLES_STEADY = samplesSql(STEADY_TRACES, STEADY_FEEDBACK, 'false');
const SAMPLES_BACKFILL = samplesSql(BACKFILL_TRACES, 'false', `score IS NOT NULL AND EXISTS (SELECT 1 FROM drift_state WHERE name = '${DRIFT_STATE_NAME}')`);

/* The window start moved to $1: the buckets it passed leave rollup_window and are deleted. */
const SLIDE_HOURS = `
  WITH gone AS (
    DELETE FROM rollup_model_hours WHERE bucket < $1::timestamptz
    RETURNING org_id, provider, model, requests, ok, cost_n, cost_sum, latency_bins, latency_n, latency_sum
  ),
  scalars AS (
    SELECT org_id, provider, model, sum(requests) AS requests, sum(ok) AS ok, sum(cost_n) AS cost_n, sum(cost_sum) AS cost_sum
    FROM gone GROUP BY 1, 2, 3
  ),
  bins AS (
    SELECT g.org_id, g.provider, g.model, u.bin, sum(u.n) AS n, sum(u.total) AS total
    FROM gone g CROSS JOIN LATERAL unnest(g.latency_bins, g.latency_n, g.latency_sum) AS u (bin, n, total)
    GROUP BY 1, 2, 3, 4
  ),
  win AS (
    UPDATE rollup_window w SET requests = w.requests - s.requests, ok = w.ok - s.ok, cost_n = w.cost_n - s.cost_n, cost_sum = w.cost_sum - s.cost_sum
    FROM scalars s WHERE w.org_id = s.org_id AND w.provider = s.provider AND w.model = s.model
    RETURNING 1
  ),
  win_latency AS (
    UPDATE rollup_window_latency w SET n = w.n - b.n, total = w.total - b.total
    FROM bins b WHERE w.org_id = b.org_id AND w.provider = b.provider AND w.model = b.model AND w.bin = b.bin
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM gone)::int AS buckets, (SELECT count(*) FROM win)::int + (SELECT count(*) FROM win_latency)::int AS window_rows`;

const SLIDE_SAMPLES = `
  WITH gone AS (
    DELETE FROM rollup_sample_hours WHERE bucket < $1::timestamptz
    RETURNING org_id, provider, model, n, score_sum, score_sq_sum, useful_sum, score_useful_sum, nps_detractors, nps_passives, nps_promoters
  ),
  sums AS (
    SELECT org_id, provider, model, sum(n) AS n, sum(score_sum) AS score_sum, sum(score_sq_sum) AS score_sq_sum, sum(useful_sum) AS useful_sum,
           sum(score_useful_sum) AS score_useful_sum, sum(nps_detractors) AS nps_detractors, sum(nps_passives) AS nps_passives,
           sum(nps_promoters) AS nps_promoters
    FROM gone GROUP BY 1, 2, 3
  ),
  win AS (
    UPDATE rollup_window w SET n = w.n - s.n, score_sum = w.score_sum - s.score_sum, score_sq_sum = w.score_sq_sum - s.score_sq_sum,
      useful_sum = w.useful_sum - s.useful_sum, score_useful_sum = w.score_useful_sum - s.score_useful_sum,
      nps_detractors = w.nps_detractors - s.nps_detractors, nps_passives = w.nps_passives - s.nps_passives,
      nps_promoters = w.nps_promoters - s.nps_promoters
    FROM sums s WHERE w.org_id = s.org_id AND w.provider = s.provider AND w.model = s.model
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM gone)::int AS buckets, (SELECT count(*) FROM win)::int AS window_rows`;

/*
 * The windows since a change point (rollup_epoch_window, migration 0014), brought in line with the
 * latest change point of each pair inside the window [$1, …): a row built for another change point,
 * or for one the window has passed, goes; a change point without a row gets one, its hours merged
 * once. From then on the trace statements add to it what falls in it, so the beat's rewrite reads a
 * row per pair instead of merging the histograms of every hour since the change.
 */
const EPOCH_WINDOWS_STALE = `
  WITH ${latestEpochsSql('$1::timestamptz')},
  stale AS (
    DELETE FROM rollup_epoch_window c
    WHERE NOT EXISTS (SELECT 1 FROM ep e WHERE ${samePair('e', 'c')} AND e.since = c.since)
    RETURNING c.org_id, c.provider, c.model
  )
  DELETE FROM rollup_epoch_window_latency l USING stale s WHERE ${samePair('l', 's')}`;

const EPOCH_WINDOWS_BUILD = `
  WITH ${latestEpochsSql('$1::timestamptz')},
  missing AS (
    SELECT e.org_id, e.provider, e.model, e.since FROM ep e
    WHERE NOT EXISTS (SELECT 1 FROM rollup_epoch_window c WHERE ${samePair('c', 'e')})
  ),
  hours AS MATERIALIZED (
    SELECT h.org_id, h.provider, h.model, h.requests, h.ok, h.cost_n, h.cost_sum, h.latency_bins, h.latency_n, h.latency_sum
    FROM missing m JOIN rollup_model_hours h ON ${samePair('h', 'm')} AND h.bucket >= ${bucketCeil('m.since')}
  ),
  win AS (
    INSERT INTO rollup_epoch_window (org_id, provider, model, since, requests, ok, cost_n, cost_sum)
    SELECT m.org_id, m.provider, m.model, m.since, COALESCE(sum(h.requests), 0), COALESCE(sum(h.ok), 0), COALESCE(sum(h.cost_n), 0), COALESCE(sum(h.cost_sum), 0)
    FROM missing m LEFT JOIN hours h ON ${samePair('h', 'm')}
    GROUP BY m.org_id, m.provider, m.model, m.since
    RETURNING 1
  ),
  latency AS (
    INSERT INTO rollup_epoch_window_latency (org_id, provider, model, bin, n, total)
    SELECT h.org_id, h.provider, h.model, u.bin, sum(u.n), sum(u.total)
    FROM hours h CROSS JOIN LATERAL unnest(h.latency_bins, h.latency_n, h.latency_sum) AS u (bin, n, total)
    GROUP BY 1, 2, 3, 4
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM win)::int AS pairs, (SELECT count(*) FROM latency)::int AS bins`;

/* Pairs whose every successful trace left the window contribute nothing any more. */
const PRUNE_PAIRS = `DELETE FROM rollup_session_pairs WHERE last_trace_at < $1::timestamptz`;
const PRUNE_WINDOW = `DELETE FROM rollup_window WHERE requests = 0 AND n = 0`;
const PRUNE_WINDOW_LATENCY = `DELETE FROM rollup_window_latency WHERE n = 0`;

/*
 * A rebuild starts from empty tables. TRUNCATE, not DELETE: instant however large they are (a DELETE
 * of millions of rows would outlast the statement timeout). It locks the tables until the beat
 * commits, but only a holder of the rollups' lock reads them.
 */
const CLEAR =
  'TRUNCATE rollup_model_hours, rollup_sample_hours, rollup_session_pairs, rollup_window, rollup_window_latency, rollup_epoch_window, rollup_epoch_window_latency, drift_queue';
/*
 * The tables a backfill fills from empty. Until their planner statistics catch up they still read
 * as empty, and then the lookup of a session's pair (SAMPLES_*, by primary key) may be planned on
 * rollup_session_pairs's (org, provider, model, bucket) index instead: a range that grows with every
 * chunk taken in (at a million traces the tenth chunk read 11 million buffers and ran into the
 * statement timeout). ANALYZE after a backfill's 1st, 2nd, 4th, 8th… chunk keeps the statistics
 * within a factor of two of the table, at a logarithm of the cost.
 */
const ANALYZE_FILLED = 'ANALYZE rollup_session_pairs, rollup_sample_hours, rollup_model_hours';

/* The $3-th row still to take in at or after $2 (S or later), in created_at order. */
const BACKFILL_END = `
  SELECT created_at FROM decision_traces t
  WHERE (t.txid IS NULL OR t.txid < $1::bigint) AND t.created_at >= $2::timestamptz
  ORDER BY t.created_at OFFSET $3 LIMIT 1`;

/* $1: when the window ends (null: the store's clock), $2: its length in seconds. */
const WINDOW_START = `SELECT ${bucketCeil('COALESCE($1::timestamptz, now()) - $2::float8 * interval \'1 second\'')} AS start`;

const LOCK = 'routing-gateway:rollups:learning';

export interface LearningWindow {
  /** `learning.window_days` in seconds. */
  windowSeconds: number;
  /** When the window ends; default the store's clock (tests and the bench move it). */
  at?: Date;
  /** How much backfill one beat takes on (rollup-state.ts). */
  backfill?: BackfillLimits;
}

export interface LearningRollupsView {
  /** Start of the window the rollups hold (a whole hour); null before the first beat. */
  windowStart: Date | null;
  /** False while a backfill is under way: the window's sums are still partial. */
  complete: boolean;
}

/**
 * Brings the learning rollups up to date inside the caller's transaction: slides the window, takes
 * in the traces and answers written since the last beat, and continues a backfill under way. The
 * caller then reads rollup_window / rollup_sample_hours in the same transaction. One caller at a time
 * (transaction-scoped advisory lock, waited for: rollup-state.ts `lock`).
 */
export class LearningRollups {
  /** Backfill chunks this process has taken in since the tables were last cleared (ANALYZE_FILLED's schedule). */
  private backfillChunks = 0;
  private readonly drift = new DriftRepository();

  async catchUp(tx: SqlExecutor, w: LearningWindow): Promise<LearningRollupsView> {
    await lock(tx, LOCK);
    const { state: stored, xmin } = await readState(tx, 'learning');
    const { rows } = await tx.query<{ start: Date | string }>(WINDOW_START, [w.at?.toISOString() ?? null, w.windowSeconds]);
    const start = new Date(rows[0].start);

    let state: RollupState;
    if (stored === null || stored.windowSeconds !== w.windowSeconds || stored.windowStart === null) {
      // First beat, or the window's length changed: buckets older than the old window are gone, so
      // everything is taken in again from the traces (a backfill), the sums from zero.
      await tx.query(CLEAR, []);
      await this.drift.skipHistory(tx, xmin);
      this.backfillChunks = 0;
      state = { txidDone: xmin, backfillTxid: xmin, backfillFrom: start, windowSeconds: w.windowSeconds, windowStart: start };
    } else {
      state = stored;
      if (start.getTime() > stored.windowStart.getTime()) {
        await this.slide(tx, start);
        state = { ...state, windowStart: start };
      }
    }
    const s = state.windowStart!.toISOString();

    const to = maxTxid(xmin, state.txidDone);
    if (to !== state.txidDone) {
      await tx.query(TRACES_STEADY, [s, state.txidDone, to]);
      await tx.query(SAMPLES_STEADY, [s, state.txidDone, to]);
      state = { ...state, txidDone: to };
    }

    if (state.backfillTxid !== null) {
      const backfillTxid = state.backfillTxid;
      // Rows older than the window need no taking in.
      if (state.backfillFrom === null || state.backfillFrom < state.windowStart!) state = { ...state, backfillFrom: state.windowStart };
      state = await backfill(
        state,
        w.backfill,
        async (from, chunkRows) => {
          const r = await tx.query<{ created_at: Date | string }>(BACKFILL_END, [backfillTxid, from.toISOString(), chunkRows]);
          return r.rows.length ? new Date(r.rows[0].created_at) : null;
        },
        async (from, until) => {
          const params = [s, backfillTxid, from.toISOString(), until?.toISOString() ?? null];
          await tx.query(TRACES_BACKFILL, params);
          await tx.query(SAMPLES_BACKFILL, params);
          this.backfillChunks++;
          if ((this.backfillChunks & (this.backfillChunks - 1)) === 0) await tx.query(ANALYZE_FILLED, []);
        },
      );
    }
    await writeState(tx, 'learning', state);
    return { windowStart: state.windowStart, complete: state.backfillTxid === null };
  }

  /**
   * Brings the windows since a change point in line with learning_epochs (EPOCH_WINDOWS_*): after the
   * change detector's step, before the rollups are read with the change points (epochWindowSql).
   * Inside the caller's transaction, holding the lock catchUp took; the rollups must be complete.
   */
  async syncEpochWindows(tx: SqlExecutor, windowStart: Date): Promise<void> {
    const p = [windowStart.toISOString()];
    await tx.query(EPOCH_WINDOWS_STALE, p);
    await tx.query(EPOCH_WINDOWS_BUILD, p);
  }

  private async slide(tx: SqlExecutor, start: Date): Promise<void> {
    const p = [start.toISOString()];
    await tx.query(SLIDE_HOURS, p);
    await tx.query(SLIDE_SAMPLES, p);
    await tx.query(PRUNE_PAIRS, p);
    await tx.query(PRUNE_WINDOW, []);
    await tx.query(PRUNE_WINDOW_LATENCY, []);
  }
}
