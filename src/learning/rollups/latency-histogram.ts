/**
 * The mergeable latency form of the rollups (docs/architecture.md "Statistics are derived, never
 * accumulated"): a sparse histogram of log-spaced bins, each bin holding how many latencies fell in
 * it and their exact sum (numeric). Bin i holds [FLOOR_MS·RATIO^i, FLOOR_MS·RATIO^(i+1)); latencies
 * below FLOOR_MS (0 included) share bin -1. Histograms of any buckets merge by adding counts and sums
 * bin by bin, and a bucket leaving the window is subtracted the same way, exactly.
 *
 * A percentile is read as percentile_cont reads raw values (linear interpolation between the order
 * statistics at floor and ceil of p·(N − 1)), each order statistic replaced by the mean of its bin.
 * Both lie in the same bin, so the error is under RATIO − 1 = 1 % of the value (under FLOOR_MS
 * absolute below FLOOR_MS), and nil when the bin holds one distinct value.
 */
export const LATENCY_BIN_RATIO = 1.01;
export const LATENCY_FLOOR_MS = 0.01;

/** SQL: the bin of a latency expression (double precision, milliseconds). */
export function latencyBinSql(latency: string): string {
  return `(CASE WHEN ${latency} >= ${LATENCY_FLOOR_MS} THEN floor(ln(${latency} / ${LATENCY_FLOOR_MS}) / ln(${LATENCY_BIN_RATIO}))::integer ELSE -1 END)`;
}

/**
 * SQL CTEs (to follow other CTEs, so starting with a comma) that read percentiles from a histogram
 * relation `source` with columns (<keys>, bin, n, total), n > 0, into a relation `<name>` with
 * columns (<keys>, p<q> for each quantile): e.g. p50, p90, p99. One ordered pass per key: each bin
 * knows the ranks it holds, [upto − n, upto), and the key's count; the bins holding the ranks
 * floor(r) and ceil(r), r = q·(count − 1), give the two order statistics to interpolate between.
 * Counts are compared as double precision: exact below 2^53.
 */
export function percentilesSql(name: string, source: string, keys: readonly string[], quantiles: readonly number[]): string {
  const k = keys.join(', ');
  const holds = (rank: string) => `upto - n <= ${rank} AND ${rank} < upto`;
  const columns = quantiles
    .map((q) => {
      const r = `(${q}::float8 * (total_n - 1))`;
      const lo = `max(rep) FILTER (WHERE ${holds(`floor(${r})`)})`;
      const hi = `max(rep) FILTER (WHERE ${holds(`ceil(${r})`)})`;
      return `${lo} + (max(${r}) - floor(max(${r}))) * (${hi} - ${lo}) AS p${Math.round(q * 100)}`;
    })
    .join(',\n           ');
  return `,
  ${name}_h AS (
    SELECT ${k}, bin, n::float8 AS n, (total / n)::float8 AS rep,
           (sum(n) OVER (PARTITION BY ${k} ORDER BY bin))::float8 AS upto,
           (sum(n) OVER (PARTITION BY ${k}))::float8 AS total_n
    FROM ${source}
  ),
  ${name} AS (
    SELECT ${k},
           ${columns}
    FROM ${name}_h GROUP BY ${k}
  )`;
}
