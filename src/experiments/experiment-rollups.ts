import { latencyBinSql } from '../learning/rollups/latency-histogram';
import { backfill, BackfillLimits, lock, maxTxid, readState, RollupState, writeState } from '../learning/rollups/rollup-state';
import type { SqlExecutor } from '../stores/sql/sql-store';

/*
 * The stop rules' rollups (docs/architecture.md "Stop rules"), per (experiment, arm), taken in by
 * transaction id like the learning rollups (src/learning/rollups/rollup-state.ts) and read by
 * experiment-stats.repository.ts instead of the experiment's traces:
 *
 *   rollup_experiment_arms      requests and errors per arm, cost of the arm's own successes, and
 *                               the sums of the feedback samples (count, score, useful);
 *   rollup_experiment_latency   the latency histogram of the arm's own successes;
 *   rollup_experiment_sessions  the sessions the arm's own target served successfully, with the
 *                               answer each contributes now (replaced when the answer changes).
 *
 * The figures are those of the stop rules' reading of the raw traces: an experiment's traces of its
 * organisation, created at most 5 minutes before it started (clocks of replicas differ), arms
 * `<arm>_fallback` counting for their arm's errors only; a 4xx counts neither way; a session is a
 * sample of an arm when the arm's own target served one of its requests successfully, whenever its
 * answer was given. No window: an experiment's figures run from its start. Only active experiments
 * are taken in, and the rows of one that ended are deleted an hour later (nothing reads them after
 * its summary).
 */

const SCOPE = `
  t.experiment_id IS NOT NULL
  AND t.experiment_arm IN ('baseline', 'candidate', 'baseline_fallback', 'candidate_fallback')
  AND e.status = 'active'
  AND t.created_at >= COALESCE(e.started_at, e.created_at) - interval '5 minutes'`;

const STEADY_TRACES = `t.txid >= $1::bigint AND t.txid < $2::bigint`;
const STEADY_FEEDBACK = `f.txid >= $1::bigint AND f.txid < $2::bigint`;
const BACKFILL_TRACES = `(t.txid IS NULL OR t.txid < $1::bigint) AND t.created_at >= $2::timestamptz AND ($3::timestamptz IS NULL OR t.created_at < $3::timestamptz)`;

const tracesSql = (range: string) => `
  WITH nt AS MATERIALIZED (
    SELECT t.experiment_id,
           CASE t.experiment_arm WHEN 'baseline_fallback' THEN 'baseline' WHEN 'candidate_fallback' THEN 'candidate' ELSE t.experiment_arm END AS arm,
           t.experiment_arm IN ('baseline', 'candidate') AS own,
           t.status BETWEEN 200 AND 299 AS ok,
           t.status >= 500 AS failed,
           t.latency_ms, t.cost_usd
    FROM decision_traces t
    JOIN experiments e ON e.id = t.experiment_id AND e.org_id = t.org_id
    WHERE ${range} AND ${SCOPE}
  ),
  req AS (
    SELECT experiment_id, arm,
           count(*) FILTER (WHERE NOT own OR ok OR failed) AS requests,
           count(*) FILTER (WHERE NOT own OR failed) AS errors,
           count(cost_usd) FILTER (WHERE own AND ok) AS cost_n,
           COALESCE(sum(cost_usd::numeric) FILTER (WHERE own AND ok), 0) AS cost_sum
    FROM nt GROUP BY experiment_id, arm
  ),
  lat AS (
    SELECT experiment_id, arm, ${latencyBinSql('latency_ms')} AS bin, count(*) AS n, sum(latency_ms::numeric) AS total
    FROM nt WHERE own AND ok GROUP BY 1, 2, 3
  ),
  arms AS (
    INSERT INTO rollup_experiment_arms AS a (experiment_id, arm, requests, errors, cost_n, cost_sum)
    SELECT experiment_id, arm, requests, errors, cost_n, cost_sum FROM req
    ON CONFLICT (experiment_id, arm) DO UPDATE SET
      requests = a.requests + EXCLUDED.requests, errors = a.errors + EXCLUDED.errors,
      cost_n = a.cost_n + EXCLUDED.cost_n, cost_sum = a.cost_sum + EXCLUDED.cost_sum
    RETURNING 1
  ),
  latency AS (
    INSERT INTO rollup_experiment_latency AS l (experiment_id, arm, bin, n, total)
    SELECT experiment_id, arm, bin, n, total FROM lat
    ON CONFLICT (experiment_id, arm, bin) DO UPDATE SET n = l.n + EXCLUDED.n, total = l.total + EXCLUDED.total
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM nt)::int AS traces, (SELECT count(*) FROM arms)::int + (SELECT count(*) FROM latency)::int AS written`;

/*
 * Touched sessions: those of a new own successful trace, and those whose answer is new. Each
 * contributes its session's answer as it stands; what it contributed before is subtracted. Reads of
 * feedback and rollup_experiment_sessions are index lookups per touched row (lateral subqueries
 * fenced by OFFSET 0), never whole-table joins.
 */
const samplesSql = (traceRange: string, feedbackRange: string) => `
  WITH nt AS (
    SELECT DISTINCT t.experiment_id, t.experiment_arm AS arm, t.org_id, t.session_id
    FROM decision_traces t
    JOIN experiments e ON e.id = t.experiment_id AND e.org_id = t.org_id
    WHERE ${traceRange} AND ${SCOPE}
      AND t.experiment_arm IN ('baseline', 'candidate') AND t.status BETWEEN 200 AND 299 AND t.session_id IS NOT NULL
  ),
  touched AS (
    SELECT experiment_id, arm, org_id, session_id FROM nt
    UNION
    SELECT s.experiment_id, s.arm, s.org_id, s.session_id
    FROM (SELECT f.org_id, f.session_id FROM feedback f WHERE ${feedbackRange}) f
    CROSS JOIN LATERAL (
      SELECT s.experiment_id, s.arm, s.org_id, s.session_id FROM rollup_experiment_sessions s
      WHERE s.org_id = f.org_id AND s.session_id = f.session_id OFFSET 0
    ) s
  ),
  calc AS (
    SELECT k.experiment_id, k.arm, k.org_id, k.session_id, s.score AS old_score, s.useful AS old_useful, f.score, f.useful
    FROM touched k
    LEFT JOIN LATERAL (
      SELECT s.score, s.useful FROM rollup_experiment_sessions s
      WHERE s.experiment_id = k.experiment_id AND s.arm = k.arm AND s.session_id = k.session_id OFFSET 0
    ) s ON true
    LEFT JOIN LATERAL (
      SELECT f.score, f.useful FROM feedback f WHERE f.org_id = k.org_id AND f.session_id = k.session_id OFFSET 0
    ) f ON true
  ),
  sessions AS (
    INSERT INTO rollup_experiment_sessions AS s (experiment_id, arm, org_id, session_id, score, useful)
    SELECT experiment_id, arm, org_id, session_id, score, useful FROM calc
    ON CONFLICT (experiment_id, arm, session_id) DO UPDATE SET score = EXCLUDED.score, useful = EXCLUDED.useful
    RETURNING 1
  ),
  delta AS (
    SELECT experiment_id, arm,
           count(score) - count(old_score) AS n,
           COALESCE(sum(score), 0) - COALESCE(sum(old_score), 0) AS score_sum,
           count(*) FILTER (WHERE useful) - count(*) FILTER (WHERE old_useful) AS useful_sum
    FROM calc GROUP BY experiment_id, arm
  ),
  arms AS (
    INSERT INTO rollup_experiment_arms AS a (experiment_id, arm, n, score_sum, useful_sum)
    SELECT experiment_id, arm, n, score_sum, useful_sum FROM delta
    ON CONFLICT (experiment_id, arm) DO UPDATE SET
      n = a.n + EXCLUDED.n, score_sum = a.score_sum + EXCLUDED.score_sum, useful_sum = a.useful_sum + EXCLUDED.useful_sum
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM sessions)::int AS sessions, (SELECT count(*) FROM arms)::int AS arms`;

const TRACES_STEADY = tracesSql(STEADY_TRACES);
const TRACES_BACKFILL = tracesSql(BACKFILL_TRACES);
const SAMPLES_STEADY = samplesSql(STEADY_TRACES, STEADY_FEEDBACK);
const SAMPLES_BACKFILL = samplesSql(BACKFILL_TRACES, 'false');

/*
 * Experiments that ended over an hour ago: their rows go (the experiment ids in the arms table are
 * few). Not at once: a replica whose stop-rule round began before another ended the experiment must
 * still read the figures the verdict was reached on, and find it ended elsewhere.
 */
const ENDED = `
  DELETE FROM rollup_experiment_arms a
  WHERE NOT EXISTS (
    SELECT 1 FROM experiments e
    WHERE e.id = a.experiment_id AND (e.status = 'active' OR e.ended_at IS NULL OR e.ended_at >= now() - interval '1 hour'))
  RETURNING a.experiment_id`;
const ENDED_LATENCY = `DELETE FROM rollup_experiment_latency WHERE experiment_id = ANY($1::uuid[])`;
const ENDED_SESSIONS = `DELETE FROM rollup_experiment_sessions WHERE experiment_id = ANY($1::uuid[])`;

/* Where a first backfill starts: the earliest active experiment's start, less the 5 minutes of margin. */
const BACKFILL_START = `SELECT min(COALESCE(started_at, created_at)) - interval '5 minutes' AS start FROM experiments WHERE status = 'active'`;

/* The $3-th experiment trace still to take in at or after $2, in created_at order. */
const BACKFILL_END = `
  SELECT t.created_at FROM decision_traces t
  WHERE (t.txid IS NULL OR t.txid < $1::bigint) AND t.created_at >= $2::timestamptz AND t.experiment_id IS NOT NULL
  ORDER BY t.created_at OFFSET $3 LIMIT 1`;

const LOCK = 'routing-gateway:rollups:experiments';

export interface ExperimentRollupsView {
  /** False while the first backfill is under way: the sums are still partial. */
  complete: boolean;
}

/** Brings the experiment rollups up to date inside the caller's transaction (see LearningRollups). */
export class ExperimentRollups {
  async catchUp(tx: SqlExecutor, limits?: BackfillLimits): Promise<ExperimentRollupsView> {
    await lock(tx, LOCK);
    const { state: stored, xmin } = await readState(tx, 'experiments');
    let state: RollupState;
    if (stored === null) {
      const { rows } = await tx.query<{ start: Date | string | null }>(BACKFILL_START, []);
      const start = rows[0]?.start ?? null;
      state = { txidDone: xmin, backfillTxid: start === null ? null : xmin, backfillFrom: start === null ? null : new Date(start), windowSeconds: null, windowStart: null };
    } else {
      state = stored;
    }

    const ended = await tx.query<{ experiment_id: string }>(ENDED, []);
    if (ended.rows.length > 0) {
      const ids = ended.rows.map((r) => r.experiment_id);
      await tx.query(ENDED_LATENCY, [ids]);
      await tx.query(ENDED_SESSIONS, [ids]);
    }

    const to = maxTxid(xmin, state.txidDone);
    if (to !== state.txidDone) {
      await tx.query(TRACES_STEADY, [state.txidDone, to]);
      await tx.query(SAMPLES_STEADY, [state.txidDone, to]);
      state = { ...state, txidDone: to };
    }

    if (state.backfillTxid !== null) {
      const backfillTxid = state.backfillTxid;
      state = await backfill(
        state,
        limits,
        async (from, chunkRows) => {
          const r = await tx.query<{ created_at: Date | string }>(BACKFILL_END, [backfillTxid, from.toISOString(), chunkRows]);
          return r.rows.length ? new Date(r.rows[0].created_at) : null;
        },
        async (from, until) => {
          const params = [backfillTxid, from.toISOString(), until?.toISOString() ?? null];
          await tx.query(TRACES_BACKFILL, params);
          await tx.query(SAMPLES_BACKFILL, params);
        },
      );
    }
    await writeState(tx, 'experiments', state);
    return { complete: state.backfillTxid === null };
  }
}
