import type { SqlExecutor } from '../../stores/sql/sql-store';

/**
 * The bookkeeping every rollup pipeline shares (docs/architecture.md "Statistics are derived, never
 * accumulated"): which rows of decision_traces and feedback are already taken in, by transaction id.
 *
 * Rows carry `txid`, the id of the transaction that wrote them (0006_rollups.sql). A beat reads
 * X = pg_snapshot_xmin(pg_current_snapshot()): every transaction below X has ended, so every row
 * with txid < X that will ever be visible is visible now, whatever order concurrent writers
 * committed in. The beat takes in [txid_done, X) and stores X as the new txid_done in the same
 * transaction as the sums: each row is added by exactly one committed beat, and a beat that fails
 * half-way adds nothing. A sequence or a created_at watermark would skip rows committed after a
 * later one; this does not. A long writing transaction holds X back (the rollups wait for it), it
 * never makes a row missed.
 *
 * Rows from before the rollups existed (txid NULL) or before a rebuild are taken in by a backfill:
 * chunks of at most BACKFILL_CHUNK rows in created_at order, as many per beat as its time budget
 * allows, each statement well inside the store's statement timeout.
 */
export type RollupName = 'learning' | 'experiments' | 'usage';

export interface RollupState {
  /** Every row with txid below this is taken in (decimal string: a bigint). */
  txidDone: string;
  /** Set while a backfill is under way: rows with txid below this (or NULL) and created_at ≥ backfillFrom are still to take in. */
  backfillTxid: string | null;
  backfillFrom: Date | null;
  windowSeconds: number | null;
  windowStart: Date | null;
}

/** Rows per backfill statement: well under a second of work on the server, far inside its statement timeout. */
export const BACKFILL_CHUNK = 10_000;
/** How long one beat may spend on backfill chunks (it takes at least one while a backfill is due). */
export const BACKFILL_BUDGET_MS = 1_000;

/** How much backfill one beat takes on; the defaults suit production, tests and the bench shrink them. */
export interface BackfillLimits {
  budgetMs?: number;
  chunkRows?: number;
}

/** The length of a rollup bucket, and its SQL twin. */
export const BUCKET_SECONDS = 3_600;
export const BUCKET_SQL = `interval '1 hour'`;
/** Buckets start on whole UTC hours whatever the session time zone. */
export const BUCKET_ORIGIN_SQL = `'2000-01-01 00:00:00+00'::timestamptz`;

/** SQL: the bucket a timestamptz expression falls in. */
export const bucketOf = (ts: string): string => `date_bin(${BUCKET_SQL}, ${ts}, ${BUCKET_ORIGIN_SQL})`;
/** SQL: the first bucket boundary at or after a timestamptz expression. */
export const bucketCeil = (ts: string): string => `date_bin(${BUCKET_SQL}, ${ts} + ${BUCKET_SQL} - interval '1 microsecond', ${BUCKET_ORIGIN_SQL})`;

/**
 * SQL: the upstream calls of the decision trace `t`, a lateral list (`CROSS JOIN LATERAL
 * ${traceCalls('t')} AS x`), each trace read once: the call that answered (`served`; its pair is NULL
 * for a request refused before routing) and each failed attempt before it, in the order they were
 * made. `ok`: a 2xx answer (never a failed attempt); `latency_ms`: the served call's only; `k`: the
 * call's place in its trace (the attempts 1, 2, …, the served call 1000).
 */
export const traceCalls = (t: string): string => `(
    SELECT true AS served, ${t}.selected_provider AS provider, ${t}.selected_model AS model, ${t}.status BETWEEN 200 AND 299 AS ok,
           ${t}.latency_ms, 1000::bigint AS k
    UNION ALL
    SELECT false, a.provider, a.model, false, NULL::float8, a.k
    FROM ROWS FROM (jsonb_to_recordset(${t}.failed_attempts) AS (provider text, model text)) WITH ORDINALITY AS a (provider, model, k)
    WHERE ${t}.failed_attempts IS NOT NULL
  )`;

/** SQL: rows `a` and `b` are of the same (org_id, provider, model). */
export const samePair = (a: string, b: string): string => `${a}.org_id = ${b}.org_id AND ${a}.provider = ${b}.provider AND ${a}.model = ${b}.model`;

interface StateRow {
  txid_done: string | null;
  backfill_txid: string | null;
  backfill_from: Date | string | null;
  window_seconds: number | null;
  window_start: Date | string | null;
  xmin: string;
  now: Date | string;
}

const READ = `
  SELECT s.txid_done::text AS txid_done, s.backfill_txid::text AS backfill_txid, s.backfill_from, s.window_seconds, s.window_start,
         pg_snapshot_xmin(pg_current_snapshot())::text AS xmin, now() AS now
  FROM (SELECT 1) AS one LEFT JOIN rollup_state s ON s.name = $1`;

const WRITE = `
  INSERT INTO rollup_state (name, txid_done, backfill_txid, backfill_from, window_seconds, window_start, updated_at)
  VALUES ($1, $2::bigint, $3::bigint, $4::timestamptz, $5::float8, $6::timestamptz, now())
  ON CONFLICT (name) DO UPDATE SET txid_done = EXCLUDED.txid_done, backfill_txid = EXCLUDED.backfill_txid,
    backfill_from = EXCLUDED.backfill_from, window_seconds = EXCLUDED.window_seconds, window_start = EXCLUDED.window_start,
    updated_at = EXCLUDED.updated_at`;

const date = (v: Date | string | null): Date | null => (v === null ? null : new Date(v));

/** The larger of two txids (decimal strings of non-negative bigints). */
export function maxTxid(a: string, b: string): string {
  return BigInt(a) >= BigInt(b) ? a : b;
}

/**
 * `pg_advisory_xact_lock`, held until the transaction ends. Waited for: a reader that comes while
 * another brings the rollups up to date must see that beat's rows too, not the one before it (two
 * replicas' stop rules reach the same verdict). A holder holds nothing else it waits on, and a beat
 * is short (its backfill is bounded by a time budget), so the wait is too.
 */
export async function lock(tx: SqlExecutor, key: string): Promise<void> {
  await tx.query(`SELECT pg_advisory_xact_lock(hashtext($1))`, [key]);
  // The beat's aggregates (a chunk's buckets and bins) fit in memory with this; the default 4 MB
  // makes a backfill chunk spill to disk. Only for this transaction.
  await tx.query(`SET LOCAL work_mem = '${BEAT_WORK_MEM}'`, []);
}

/** The beat transaction's `work_mem` (lock): its aggregates fit in memory with it. */
export const BEAT_WORK_MEM = '32MB';

/**
 * The pipeline's state as committed (null before its first beat), the xmin of a snapshot taken now
 * and the store's clock. Read after the pipeline's lock is held, in its own statement: under READ
 * COMMITTED it sees the previous holder's commit.
 */
export async function readState(tx: SqlExecutor, name: RollupName): Promise<{ state: RollupState | null; xmin: string; now: Date }> {
  const { rows } = await tx.query<StateRow>(READ, [name]);
  const r = rows[0];
  const state =
    r.txid_done === null
      ? null
      : {
          txidDone: r.txid_done,
          backfillTxid: r.backfill_txid,
          backfillFrom: date(r.backfill_from),
          windowSeconds: r.window_seconds === null ? null : Number(r.window_seconds),
          windowStart: date(r.window_start),
        };
  return { state, xmin: r.xmin, now: new Date(r.now) };
}

export async function writeState(tx: SqlExecutor, name: RollupName, s: RollupState): Promise<void> {
  await tx.query(WRITE, [name, s.txidDone, s.backfillTxid, s.backfillFrom?.toISOString() ?? null, s.windowSeconds, s.windowStart?.toISOString() ?? null]);
}

/**
 * Runs backfill chunks while the budget lasts. `findEnd(from, rows)` answers the created_at of the
 * rows-th remaining row at or after `from` (null: fewer remain); `chunk(from, to)` takes in the
 * remaining rows with created_at in [from, to) (to null: unbounded). Returns the new state.
 */
export async function backfill(
  state: RollupState,
  limits: BackfillLimits | undefined,
  findEnd: (from: Date, rows: number) => Promise<Date | null>,
  chunk: (from: Date, to: Date | null) => Promise<void>,
): Promise<RollupState> {
  const budgetMs = limits?.budgetMs ?? BACKFILL_BUDGET_MS;
  const rows = limits?.chunkRows ?? BACKFILL_CHUNK;
  const started = Date.now();
  let s = state;
  while (s.backfillTxid !== null && s.backfillFrom !== null) {
    const from = s.backfillFrom;
    let to = await findEnd(from, rows);
    // More than a chunk's worth of rows share `from` exactly: take all of them in this chunk.
    if (to !== null && to.getTime() <= from.getTime()) to = new Date(from.getTime() + 1);
    await chunk(from, to);
    s = to === null ? { ...s, backfillTxid: null, backfillFrom: null } : { ...s, backfillFrom: to };
    if (Date.now() - started >= budgetMs) break;
  }
  return s;
}
