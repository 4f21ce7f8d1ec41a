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
 * columns (<keys>, p<q> for each quantile): e.g. p50, p90, p99.
 */
export function percentilesSql(name: string, source: string, keys: readonly string[], quantiles: readonly number[]): string {
  const k = keys.join(', ');
  const on = (a: string, b: string) => keys.map((c) => `${a}.${c} = ${b}.${c}`).join(' AND ');
  const values = quantiles.map((q) => `(${q}::float8)`).join(', ');
  const columns = quantiles.map((q) => `max(v) FILTER (WHERE q = ${q}::float8) AS p${Math.round(q * 100)}`).join(', ');
  return `,
  ${name}_h AS (
    SELECT ${k}, bin, n, (total / n)::float8 AS rep, sum(n) OVER (PARTITION BY ${k} ORDER BY bin) AS upto
    FROM ${source}
  ),
  ${name}_r AS (
    SELECT c.*, qs.q, qs.q * (c.total_n - 1)::float8 AS r
    FROM (SELECT ${k}, max(upto) AS total_n FROM ${name}_h GROUP BY ${k}) c
    CROSS JOIN (VALUES ${values}) AS qs (q)
  ),
  ${name}_lo AS MATERIALIZED (
    SELECT ${keys.map((c) => `x.${c}`).join(', ')}, x.q, x.r, b.rep
    FROM ${name}_r x JOIN ${name}_h b ON ${on('b', 'x')} AND b.upto - b.n <= floor(x.r) AND floor(x.r) < b.upto
  ),
  ${name}_hi AS MATERIALIZED (
    SELECT ${keys.map((c) => `x.${c}`).join(', ')}, x.q, b.rep
    FROM ${name}_r x JOIN ${name}_h b ON ${on('b', 'x')} AND b.upto - b.n <= ceil(x.r) AND ceil(x.r) < b.upto
  ),
  ${name}_v AS (
    SELECT ${keys.map((c) => `lo.${c}`).join(', ')}, lo.q, lo.rep + (lo.r - floor(lo.r)) * (hi.rep - lo.rep) AS v
    FROM ${name}_lo lo JOIN ${name}_hi hi ON ${on('hi', 'lo')} AND hi.q = lo.q
  ),
  ${name} AS (
    SELECT ${k}, ${columns} FROM ${name}_v GROUP BY ${k}
  )`;
}
