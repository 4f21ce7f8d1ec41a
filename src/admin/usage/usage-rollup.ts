import { latencyBinSql, percentilesSql } from '../../learning/rollups/latency-histogram';
import { backfill, BACKFILL_CHUNK, BackfillLimits, BUCKET_ORIGIN_SQL, lock, maxTxid, readState, RollupState, writeState } from '../../learning/rollups/rollup-state';
import type { SqlExecutor } from '../../stores/sql/sql-store';
import type { UsageStep } from './usage-reader';

/*
 * The usage rollups (docs/architecture.md "Usage from rollups"): table usage_rollups (migration
 * 0012), one row per (organisation, step, dimension, bucket, value) with what a point of
 * `GET /v1/admin/usage` answers. Taken in by transaction id like the learning rollups
 * (src/learning/rollups/rollup-state.ts, pipeline 'usage'): every trace is added once, to each of
 * its rows, by the one beat whose [txid_done, xmin) holds its txid, or by the backfill.
 *
 *   steps       minute (while the bucket is at or after the state's window_start: a short horizon),
 *               hour and day (kept for retention.rollups_days);
 *   dimensions  '' (the organisation's total), model, provider, key, route, status; the value is the
 *               raw reader's group (trace-usage.repository.ts GROUP_COLUMN), '' where the trace has none.
 *
 * A chunk of traces is read grouped by the few columns usage needs (the latency's histogram bin
 * computed by the learning rollups' rule), with each group's count and sums: a minute of one key's
 * traces on one model is a few dozen groups, not thousands of rows (each row cost the store's thread
 * its encoding, the process a clone and the spread below 18 row lookups: most of a beat, and a
 * heap swing of tens of MiB for a minute of heavy traffic). The groups are spread over their 12 to
 * 18 rows here, in the process (maps per chunk: far cheaper than the same fan-out and its
 * multi-column sorts in SQL), and written in one
 * statement: each row's counts added to, its codes, pairs and latency histogram merged with those it
 * had (read by primary key in the statement: one writer holds the lock), and its percentiles read
 * again from the merged histogram, so a reader of a whole bucket reads three numbers instead of a
 * histogram.
 */

/** How long minute rows are kept: the longest minute-step range (10,000 minutes, under 7 days) ending now. */
export const MINUTE_HORIZON_SECONDS = 7 * 86_400;

/** The steps rows are kept at, with their length in seconds. Buckets start on whole UTC minutes, hours and days (BUCKET_ORIGIN_SQL, a whole day after the epoch). */
const STEPS: ReadonlyArray<readonly [UsageStep, number]> = [
  ['minute', 60],
  ['hour', 3_600],
  ['day', 86_400],
];
/** The dimensions rows are kept for ('' = the organisation's total) and each trace's value of them: GROUP_COLUMN of the raw reader. */
const DIMS: ReadonlyArray<readonly [string, (t: TraceRow) => string]> = [
  ['', () => ''],
  ['model', (t) => t.selected_model ?? ''],
  ['provider', (t) => t.selected_provider ?? ''],
  ['key', (t) => t.api_key_id],
  ['route', (t) => t.route ?? ''],
  ['status', (t) => String(t.status)],
];

/*
 * A chunk's traces, grouped by what tells their rows apart: the txid range, and created_at in [lo, hi)
 * (hi null: unbounded) holding at most a chunk's worth (STEADY_END, BACKFILL_END), so no statement
 * outgrows the statement timeout however much arrived. `minute`: the start of the traces' minute, in
 * seconds since the epoch; `n` the group's traces; the sums are over them (a NULL counts 0).
 */
const tracesSql = (range: string, lo: string, hi: string) => `
  SELECT t.org_id, extract(epoch FROM date_bin(interval '1 minute', t.created_at, ${BUCKET_ORIGIN_SQL}))::bigint AS minute,
         t.status, t.error_code, ${latencyBinSql('t.latency_ms')} AS bin, t.fallback_used, t.selected_provider,
         t.selected_model, t.api_key_id, t.route, count(*)::int AS n, sum(t.latency_ms)::float8 AS latency_ms,
         coalesce(sum(t.cost_usd), 0)::float8 AS cost_usd, coalesce(sum(t.prompt_tokens), 0)::float8 AS prompt_tokens,
         coalesce(sum(t.completion_tokens), 0)::float8 AS completion_tokens, coalesce(sum(t.reasoning_tokens), 0)::float8 AS reasoning_tokens
  FROM decision_traces t
  WHERE ${range} AND t.created_at >= ${lo}::timestamptz AND (${hi}::timestamptz IS NULL OR t.created_at < ${hi}::timestamptz)
  GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10`;
const STEADY_TRACES = tracesSql(`t.txid >= $1::bigint AND t.txid < $2::bigint`, '$3', '$4');
const BACKFILL_TRACES = tracesSql(`(t.txid IS NULL OR t.txid < $1::bigint)`, '$2', '$3');

/** A group of a chunk's traces that share every column a row is told apart by; the numbers are its count and sums. */
interface TraceRow {
  org_id: string;
  minute: string | number;
  status: number;
  error_code: string | null;
  bin: number;
  fallback_used: boolean;
  selected_provider: string | null;
  selected_model: string | null;
  api_key_id: string;
  route: string | null;
  n: number;
  latency_ms: number;
  cost_usd: number;
  prompt_tokens: number;
  completion_tokens: number;
  reasoning_tokens: number;
}

/** One row's share of a chunk. */
interface Delta {
  org: string;
  step: UsageStep;
  dim: string;
  bucket: number;
  value: string;
  requests: number;
  errors: number;
  fallbacks: number;
  prompt: number;
  completion: number;
  reasoning: number;
  cost: number;
  codes: Map<string, number>;
  pairs: Map<string, { provider: string | null; model: string | null; n: number }>;
  bins: Map<number, { n: number; total: number }>;
}

/** One map per dimension (DIMS' order) of a bucket's rows, by the dimension's value. */
type BucketRows = Array<Map<string, Delta>>;

/**
 * The chunk's groups of traces spread over their rows: minute rows only for minutes at or after
 * `minuteFrom` (s). Rows are found through maps nested by organisation, step, bucket and dimension,
 * so a group costs no key string per row (18 per group as one concatenated key each: most of a
 * beat's garbage). Index loops, no destructuring: this runs once a minute, in V8's interpreter,
 * where each for-of step and destructuring allocates an iterator result.
 */
function spread(groups: readonly TraceRow[], minuteFrom: number): Delta[] {
  const rows: Delta[] = [];
  const byOrg = new Map<string, Array<Map<number, BucketRows>>>();
  for (let g = 0; g < groups.length; g++) {
    const t = groups[g];
    const n = t.n;
    const minute = Number(t.minute);
    const ok = t.status >= 200 && t.status <= 299;
    const code = t.status >= 400 ? (t.error_code ?? 'unknown') : null;
    const pair = JSON.stringify([t.selected_provider, t.selected_model]);
    let steps = byOrg.get(t.org_id);
    if (!steps) byOrg.set(t.org_id, (steps = STEPS.map(() => new Map<number, BucketRows>())));
    for (let s = 0; s < STEPS.length; s++) {
      const step = STEPS[s][0];
      if (step === 'minute' && minute < minuteFrom) continue;
      const bucket = minute - (minute % STEPS[s][1]);
      let dims = steps[s].get(bucket);
      if (!dims) steps[s].set(bucket, (dims = DIMS.map(() => new Map<string, Delta>())));
      for (let i = 0; i < DIMS.length; i++) {
        const value = DIMS[i][1](t);
        let d = dims[i].get(value);
        if (!d) {
          d = { org: t.org_id, step, dim: DIMS[i][0], bucket, value, requests: 0, errors: 0, fallbacks: 0, prompt: 0, completion: 0, reasoning: 0, cost: 0, codes: new Map(), pairs: new Map(), bins: new Map() };
          dims[i].set(value, d);
          rows.push(d);
        }
        d.requests += n;
        if (t.fallback_used) d.fallbacks += n;
        d.prompt += t.prompt_tokens;
        d.completion += t.completion_tokens;
        d.reasoning += t.reasoning_tokens;
        d.cost += t.cost_usd;
        if (code !== null) {
          d.errors += n;
          d.codes.set(code, (d.codes.get(code) ?? 0) + n);
        }
        const p = d.pairs.get(pair);
        if (p) p.n += n;
        else d.pairs.set(pair, { provider: t.selected_provider, model: t.selected_model, n });
        if (ok) {
          const b = d.bins.get(t.bin);
          if (b) {
            b.n += n;
            b.total += t.latency_ms;
          } else d.bins.set(t.bin, { n, total: t.latency_ms });
        }
      }
    }
  }
  return rows;
}

/*
 * The chunk's rows written: $1..$12 one element per row (key, counts, cost), $13..$15 its errors per
 * code, $16..$19 its requests per (provider, model), $20..$23 its histogram bins, each with the row's
 * ordinal. Merged with the row as it stands, keyed by that ordinal (an integer: the merges sort on
 * it, not on the five columns of the row's key).
 */
const WRITE = `
  WITH k AS MATERIALIZED (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::bigint[], $7::bigint[], $8::bigint[],
                         $9::bigint[], $10::bigint[], $11::bigint[], $12::float8[])
      WITH ORDINALITY AS k (org_id, step, dim, bucket_s, value, requests, errors, fallbacks, prompt_tokens, completion_tokens,
                            reasoning_tokens, cost_usd, i)
  ),
  old AS MATERIALIZED (
    SELECT k.i, u.error_codes, u.error_counts, u.traffic_providers, u.traffic_models, u.traffic_counts, u.latency_bins, u.latency_n, u.latency_sum
    FROM k
    -- One primary-key lookup per row, never a scan of them all (OFFSET 0 keeps the planner from
    -- flattening the lookup into a join that hashes the whole table).
    CROSS JOIN LATERAL (
      SELECT * FROM usage_rollups u
      WHERE u.org_id = k.org_id AND u.step = k.step AND u.dim = k.dim AND u.bucket = to_timestamp(k.bucket_s) AND u.value = k.value
      OFFSET 0
    ) u
  ),
  codes AS MATERIALIZED (
    SELECT i, array_agg(code ORDER BY code) AS codes, array_agg(n ORDER BY code) AS counts
    FROM (
      SELECT i, code, sum(n)::bigint AS n FROM (
        SELECT * FROM unnest($13::bigint[], $14::text[], $15::bigint[]) AS c (i, code, n)
        UNION ALL
        SELECT o.i, c.code, c.n FROM old o CROSS JOIN LATERAL unnest(o.error_codes, o.error_counts) AS c (code, n)
      ) c GROUP BY i, code
    ) c GROUP BY i
  ),
  pairs AS MATERIALIZED (
    SELECT i, array_agg(provider ORDER BY provider, model) AS providers, array_agg(model ORDER BY provider, model) AS models,
           array_agg(n ORDER BY provider, model) AS counts
    FROM (
      SELECT i, provider, model, sum(n)::bigint AS n FROM (
        SELECT * FROM unnest($16::bigint[], $17::text[], $18::text[], $19::bigint[]) AS p (i, provider, model, n)
        UNION ALL
        SELECT o.i, p.provider, p.model, p.n FROM old o CROSS JOIN LATERAL unnest(o.traffic_providers, o.traffic_models, o.traffic_counts) AS p (provider, model, n)
      ) p GROUP BY i, provider, model
    ) p GROUP BY i
  ),
  bins AS MATERIALIZED (
    SELECT i, bin, sum(n)::bigint AS n, sum(total) AS total FROM (
      SELECT * FROM unnest($20::bigint[], $21::integer[], $22::bigint[], $23::float8[]) AS b (i, bin, n, total)
      UNION ALL
      SELECT o.i, h.bin, h.n, h.total FROM old o CROSS JOIN LATERAL unnest(o.latency_bins, o.latency_n, o.latency_sum) AS h (bin, n, total)
    ) b GROUP BY i, bin
  ),
  hist AS MATERIALIZED (
    SELECT i, array_agg(bin ORDER BY bin) AS bins, array_agg(n ORDER BY bin) AS ns, array_agg(total ORDER BY bin) AS totals FROM bins GROUP BY i
  )
  ${percentilesSql('pct', 'bins', ['i'], [0.5, 0.9, 0.99])},
  -- Computed once, not once per row the insert joins it to.
  pcts AS MATERIALIZED (SELECT * FROM pct)
  INSERT INTO usage_rollups AS u (org_id, step, dim, bucket, value, requests, errors, fallbacks, prompt_tokens, completion_tokens,
                                  reasoning_tokens, cost_usd, latency_p50, latency_p90, latency_p99, error_codes, error_counts,
                                  traffic_providers, traffic_models, traffic_counts, latency_bins, latency_n, latency_sum)
  SELECT k.org_id, k.step, k.dim, to_timestamp(k.bucket_s), k.value, k.requests, k.errors, k.fallbacks, k.prompt_tokens, k.completion_tokens,
         k.reasoning_tokens, k.cost_usd::numeric, pct.p50, pct.p90, pct.p99, COALESCE(c.codes, '{}'), COALESCE(c.counts, '{}'),
         p.providers, p.models, p.counts, COALESCE(h.bins, '{}'), COALESCE(h.ns, '{}'), COALESCE(h.totals, '{}')
  FROM k
  JOIN pairs p ON p.i = k.i
  LEFT JOIN codes c ON c.i = k.i
  LEFT JOIN hist h ON h.i = k.i
  LEFT JOIN pcts pct ON pct.i = k.i
  ON CONFLICT (org_id, step, dim, bucket, value) DO UPDATE SET
    requests = u.requests + EXCLUDED.requests, errors = u.errors + EXCLUDED.errors, fallbacks = u.fallbacks + EXCLUDED.fallbacks,
    prompt_tokens = u.prompt_tokens + EXCLUDED.prompt_tokens, completion_tokens = u.completion_tokens + EXCLUDED.completion_tokens,
    reasoning_tokens = u.reasoning_tokens + EXCLUDED.reasoning_tokens, cost_usd = u.cost_usd + EXCLUDED.cost_usd,
    latency_p50 = EXCLUDED.latency_p50, latency_p90 = EXCLUDED.latency_p90, latency_p99 = EXCLUDED.latency_p99,
    error_codes = EXCLUDED.error_codes, error_counts = EXCLUDED.error_counts,
    traffic_providers = EXCLUDED.traffic_providers, traffic_models = EXCLUDED.traffic_models, traffic_counts = EXCLUDED.traffic_counts,
    latency_bins = EXCLUDED.latency_bins, latency_n = EXCLUDED.latency_n, latency_sum = EXCLUDED.latency_sum`;

/**
 * Rows per write statement. A chunk's traces make from a handful of rows each (sparse traffic: a
 * row per minute, hour and day and dimension) down to a fraction of one (busy minutes): the
 * statement's cost follows its rows, so they are written in batches that stay well inside the
 * statement timeout.
 */
const WRITE_ROWS = 4_000;

/** Writes rows of a chunk (WRITE); the number of rows. */
async function write(tx: SqlExecutor, deltas: readonly Delta[]): Promise<number> {
  if (deltas.length === 0) return 0;
  const codes: [number[], string[], number[]] = [[], [], []];
  const pairs: [number[], Array<string | null>, Array<string | null>, number[]] = [[], [], [], []];
  const bins: [number[], number[], number[], number[]] = [[], [], [], []];
  // Map.forEach: a for-of over a map's entries allocates an entry pair per element.
  deltas.forEach((d, idx) => {
    const i = idx + 1;
    d.codes.forEach((n, code) => (codes[0].push(i), codes[1].push(code), codes[2].push(n)));
    d.pairs.forEach((p) => (pairs[0].push(i), pairs[1].push(p.provider), pairs[2].push(p.model), pairs[3].push(p.n)));
    d.bins.forEach((b, bin) => (bins[0].push(i), bins[1].push(bin), bins[2].push(b.n), bins[3].push(b.total)));
  });
  const col = <T>(f: (d: Delta) => T): T[] => deltas.map(f);
  await tx.query(WRITE, [
    col((d) => d.org),
    col((d) => d.step),
    col((d) => d.dim),
    col((d) => d.bucket),
    col((d) => d.value),
    col((d) => d.requests),
    col((d) => d.errors),
    col((d) => d.fallbacks),
    col((d) => d.prompt),
    col((d) => d.completion),
    col((d) => d.reasoning),
    col((d) => d.cost),
    ...codes,
    ...pairs,
    ...bins,
  ]);
  return deltas.length;
}

/* Minute rows older than the horizon's new start ($1) go; the hour and day rows hold those minutes. */
const PRUNE_MINUTES = `DELETE FROM usage_rollups WHERE step = 'minute' AND bucket < $1::timestamptz`;

/* A rebuild starts from an empty table (TRUNCATE: instant however large; see learning-rollups.ts CLEAR). */
const CLEAR = 'TRUNCATE usage_rollups';

/* Where a backfill starts: the oldest trace, or the oldest that retention.rollups_days keeps rows for ($1), whichever is later. */
const BACKFILL_START = `SELECT CASE WHEN min(created_at) IS NOT NULL THEN GREATEST(min(created_at), $1::timestamptz) END AS start FROM decision_traces`;

/* The $n-th trace still to take in at or after a created_at, in created_at order: a chunk's end. */
const STEADY_END = `
  SELECT created_at FROM decision_traces t
  WHERE t.txid >= $1::bigint AND t.txid < $2::bigint AND t.created_at >= $3::timestamptz
  ORDER BY t.created_at OFFSET $4 LIMIT 1`;
const BACKFILL_END = `
  SELECT created_at FROM decision_traces t
  WHERE (t.txid IS NULL OR t.txid < $1::bigint) AND t.created_at >= $2::timestamptz
  ORDER BY t.created_at OFFSET $3 LIMIT 1`;

/* The minute horizon's start at the store's clock ($1 seconds back), on a whole hour. */
const MINUTE_START = `SELECT date_bin(interval '1 hour', now() - $1::float8 * interval '1 second', ${BUCKET_ORIGIN_SQL}) AS start`;

const LOCK = 'routing-gateway:rollups:usage';

export interface UsageRollupsOptions {
  /** `retention.rollups_days` in seconds (null: kept forever): a first backfill starts no earlier than this far back. */
  keepSeconds: number | null;
  /** How much backfill one beat takes on (rollup-state.ts). */
  backfill?: BackfillLimits;
}

export interface UsageRollupsView {
  /** Traces taken in by this beat (steady and backfill). */
  traces: number;
  /** False while a backfill is under way: the reader reads the traces it has not reached from decision_traces. */
  complete: boolean;
}

/** What a reader needs to know of the rollups, read in its own snapshot (UsageRollups.coverage). */
export interface UsageCoverage {
  /** Every trace with txid below this is in the rollups (unless the backfill has not reached it). */
  txidDone: string;
  /** While a backfill is under way: traces with txid below this (or none) and created_at at or after `backfillFrom` are not in yet. */
  backfillTxid: string | null;
  backfillFrom: Date | null;
  /** Minute rows hold every trace taken in from here on; null: no minute rows (no beat yet). */
  minuteFrom: Date | null;
}

/**
 * Brings the usage rollups up to date inside the caller's transaction: moves the minute horizon,
 * takes in the traces written since the last beat, and continues a backfill under way. One caller at
 * a time (transaction-scoped advisory lock, waited for: rollup-state.ts `lock`).
 */
export class UsageRollups {
  async catchUp(tx: SqlExecutor, o: UsageRollupsOptions): Promise<UsageRollupsView> {
    await lock(tx, LOCK);
    const { state: stored, xmin, now } = await readState(tx, 'usage');
    const { rows } = await tx.query<{ start: Date | string }>(MINUTE_START, [MINUTE_HORIZON_SECONDS]);
    const minuteStart = new Date(rows[0].start);
    let traces = 0;

    let state: RollupState;
    if (stored === null || stored.windowStart === null) {
      // First beat, or the state was removed to rebuild: everything is taken in again from the traces.
      await tx.query(CLEAR, []);
      const keepFrom = o.keepSeconds === null ? null : new Date(now.getTime() - o.keepSeconds * 1000);
      const r = await tx.query<{ start: Date | string | null }>(BACKFILL_START, [keepFrom?.toISOString() ?? null]);
      const start = r.rows[0]?.start ?? null;
      state = {
        txidDone: xmin,
        backfillTxid: start === null ? null : xmin,
        backfillFrom: start === null ? null : new Date(start),
        windowSeconds: MINUTE_HORIZON_SECONDS,
        windowStart: minuteStart,
      };
    } else {
      state = stored;
      // The horizon only moves forward: minutes before the stored start were never kept.
      if (minuteStart.getTime() > stored.windowStart.getTime()) {
        await tx.query(PRUNE_MINUTES, [minuteStart.toISOString()]);
        state = { ...state, windowStart: minuteStart, windowSeconds: MINUTE_HORIZON_SECONDS };
      }
    }
    const minuteFrom = state.windowStart!.getTime() / 1000;

    const to = maxTxid(xmin, state.txidDone);
    if (to !== state.txidDone) {
      // Usually one chunk (what arrived since the last beat); a backlog (the job stopped for hours)
      // in as many as it takes, all in this beat.
      const done = state.txidDone;
      const rows = o.backfill?.chunkRows ?? BACKFILL_CHUNK;
      let from = '-infinity';
      for (;;) {
        const r = await tx.query<{ created_at: Date | string }>(STEADY_END, [done, to, from, rows]);
        let until = r.rows.length ? new Date(r.rows[0].created_at).toISOString() : null;
        // More than a chunk's worth of traces share `from` exactly: all of them in this chunk.
        if (until !== null && until <= from) until = new Date(new Date(from).getTime() + 1).toISOString();
        traces += await this.takeIn(tx, STEADY_TRACES, [done, to, from, until], minuteFrom);
        if (until === null) break;
        from = until;
      }
      state = { ...state, txidDone: to };
    }

    if (state.backfillTxid !== null) {
      const backfillTxid = state.backfillTxid;
      state = await backfill(
        state,
        o.backfill,
        async (from, chunkRows) => {
          const r = await tx.query<{ created_at: Date | string }>(BACKFILL_END, [backfillTxid, from.toISOString(), chunkRows]);
          return r.rows.length ? new Date(r.rows[0].created_at) : null;
        },
        async (from, until) => {
          traces += await this.takeIn(tx, BACKFILL_TRACES, [backfillTxid, from.toISOString(), until?.toISOString() ?? null], minuteFrom);
        },
      );
    }
    await writeState(tx, 'usage', state);
    return { traces, complete: state.backfillTxid === null };
  }

  /** Reads one chunk of traces (in groups) and writes their rows, WRITE_ROWS per statement; how many traces. */
  private async takeIn(tx: SqlExecutor, sql: string, params: unknown[], minuteFrom: number): Promise<number> {
    const { rows } = await tx.query<TraceRow>(sql, params);
    const deltas = spread(rows, minuteFrom);
    for (let i = 0; i < deltas.length; i += WRITE_ROWS) await write(tx, deltas.slice(i, i + WRITE_ROWS));
    return rows.reduce((sum, g) => sum + g.n, 0);
  }

  /**
   * What the rollups hold, as of the caller's snapshot (a reader reads this and the rows in one
   * REPEATABLE READ transaction, so a beat committing between them cannot make a trace count twice
   * or not at all). Null before the first beat: nothing is in the rollups.
   */
  async coverage(tx: SqlExecutor): Promise<UsageCoverage | null> {
    const { rows } = await tx.query<{ txid_done: string; backfill_txid: string | null; backfill_from: Date | string | null; window_start: Date | string | null }>(
      `SELECT txid_done::text AS txid_done, backfill_txid::text AS backfill_txid, backfill_from, window_start FROM rollup_state WHERE name = 'usage'`,
      [],
    );
    const r = rows[0];
    if (!r) return null;
    return {
      txidDone: r.txid_done,
      backfillTxid: r.backfill_txid,
      backfillFrom: r.backfill_from === null ? null : new Date(r.backfill_from),
      minuteFrom: r.window_start === null ? null : new Date(r.window_start),
    };
  }
}
