import { Injectable } from '@nestjs/common';
import { AppConfig } from '../../config/app-config';
import { latencyBinSql, percentilesSql } from '../../learning/rollups/latency-histogram';
import { BackfillLimits, BUCKET_ORIGIN_SQL } from '../../learning/rollups/rollup-state';
import { SqlStore } from '../../stores/sql/sql-store';
import { GROUP_COLUMN } from './trace-usage.repository';
import { UsageCoverage, UsageRollups, UsageRollupsView } from './usage-rollup';
import { STEP_MS, UsageQuery, UsageReader, UsageRow } from './usage-reader';
import { Segment, segmentsOf } from './usage-segments';

/*
 * A page of usage points from the rollups (docs/architecture.md "Usage from rollups"), in one
 * statement, the same answer as the raw reader (trace-usage.repository.ts) gives:
 *
 *   main     the range's whole buckets of the query's step: the first $6 rows after the cursor
 *            ($4 bucket, $5 group) of one primary-key range, with their stored percentiles;
 *   fine     the edges' whole hours and minutes, each in its point's bucket ($3 the step);
 *   raw      the edges' seconds left over, and every trace of the rest of the range that the rollups
 *            have not taken in yet (the tail since the last beat; a backfill's remainder), from
 *            decision_traces;
 *   keys     the page: the first $6 (bucket, group) of all three after the cursor, up to `last`. A
 *            point in the page is among the first $6 of main if main has it, so main's limit loses
 *            none, and every part is cut at `last` by comparison rather than joined to the keys;
 *   ex       the points fine or raw add to: their percentiles are read from the merged histograms
 *            (the whole bucket's own read by primary key), the others' are main's as stored.
 *
 * $1 organisation, $2 dimension ('' ungrouped); the segments' bounds and the tail's bounds follow.
 * Every fragment is a constant chosen by the validated step and group, never text of the request.
 */
const POINT = `requests, errors, fallbacks, prompt_tokens, completion_tokens, reasoning_tokens, cost_usd`;
const ARRAYS = `error_codes, error_counts, traffic_providers, traffic_models, traffic_counts`;
const AFTER = `($4::timestamptz IS NULL OR (bucket, grp) > ($4::timestamptz, $5::text))`;
/** Within the page: at or before its last point (CTE `last`; none when the page is empty). */
const UPTO = `(bucket, grp) <= ((SELECT bucket FROM last), (SELECT grp FROM last))`;
const RAW_COLUMNS = `status, error_code, latency_ms, cost_usd, prompt_tokens, completion_tokens, reasoning_tokens, fallback_used, selected_provider, selected_model`;

interface Built {
  sql: string;
  params: unknown[];
}

function build(q: UsageQuery, from: number, segments: Segment[], coverage: UsageCoverage | null): Built {
  const params: unknown[] = [q.orgId, q.groupBy ?? '', `${STEP_MS[q.step] / 1000} seconds`, q.after ? new Date(q.after.bucketMs).toISOString() : null, q.after?.group ?? null, q.limit];
  const p = (v: unknown): string => {
    params.push(v);
    return `$${params.length}`;
  };
  const at = (ms: number) => p(new Date(ms).toISOString());
  const bucketOf = (ts: string) => `date_bin($3::interval, ${ts}, ${BUCKET_ORIGIN_SQL})`;

  const whole = segments.find((s) => s.source === q.step);
  const main = whole
    ? `SELECT bucket, value AS grp, ${POINT}, latency_p50, latency_p90, latency_p99, ${ARRAYS}
       FROM usage_rollups
       WHERE org_id = $1 AND step = ${p(q.step)} AND dim = $2 AND bucket >= ${at(whole.from)}::timestamptz AND bucket < ${at(whole.to)}::timestamptz
         AND ($4::timestamptz IS NULL OR (bucket, value) > ($4::timestamptz, $5::text))
       ORDER BY bucket, value LIMIT $6`
    : `SELECT bucket, value AS grp, ${POINT}, latency_p50, latency_p90, latency_p99, ${ARRAYS} FROM usage_rollups WHERE false`;
  const mainStep = whole ? p(q.step) : 'NULL';

  const finer = segments.filter((s) => s.source !== 'raw' && s !== whole);
  const fine = finer.length
    ? finer
        .map(
          (s) => `SELECT ${bucketOf('bucket')} AS bucket, value AS grp, ${POINT}, ${ARRAYS}, latency_bins, latency_n, latency_sum
                  FROM usage_rollups
                  WHERE org_id = $1 AND step = ${p(s.source)} AND dim = $2 AND bucket >= ${at(s.from)}::timestamptz AND bucket < ${at(s.to)}::timestamptz`,
        )
        .join('\n      UNION ALL\n      ')
    : `SELECT bucket, value AS grp, ${POINT}, ${ARRAYS}, latency_bins, latency_n, latency_sum FROM usage_rollups WHERE false`;

  const rawSegments = segments.filter((s) => s.source === 'raw');
  const inRaw = rawSegments.map((s) => `(created_at >= ${at(s.from)}::timestamptz AND created_at < ${at(s.to)}::timestamptz)`);
  const rawParts = rawSegments.map((_, i) => `SELECT ${bucketOf('created_at')} AS bucket, ${GROUP_COLUMN[q.groupBy ?? 'none']} AS grp, ${RAW_COLUMNS}
                  FROM decision_traces WHERE org_id = $1 AND ${inRaw[i]}`);
  // The tail: traces of the rollups' segments that no beat has taken in yet (rollup-state.ts).
  if (coverage && rawSegments.length < segments.length) {
    const pending = [`txid >= ${p(coverage.txidDone)}::bigint`];
    if (coverage.backfillTxid !== null && coverage.backfillFrom !== null) {
      pending.push(`((txid IS NULL OR txid < ${p(coverage.backfillTxid)}::bigint) AND created_at >= ${p(coverage.backfillFrom.toISOString())}::timestamptz)`);
    }
    rawParts.push(`SELECT ${bucketOf('created_at')} AS bucket, ${GROUP_COLUMN[q.groupBy ?? 'none']} AS grp, ${RAW_COLUMNS}
                  FROM decision_traces
                  WHERE org_id = $1 AND created_at >= ${at(from)}::timestamptz AND created_at < ${at(q.to.getTime())}::timestamptz
                    AND (${pending.join(' OR ')})${inRaw.length ? ` AND NOT (${inRaw.join(' OR ')})` : ''}`);
  }
  const raw = rawParts.length ? rawParts.join('\n      UNION ALL\n      ') : `SELECT now() AS bucket, ''::text AS grp, ${RAW_COLUMNS} FROM decision_traces WHERE false`;

  const inMain = (col: string) => (whole ? `${col} >= ${at(whole.from)}::timestamptz AND ${col} < ${at(whole.to)}::timestamptz` : 'false');
  const sql = `
  WITH main AS MATERIALIZED (
    ${main}
  ),
  fine AS MATERIALIZED (
    SELECT * FROM (
      ${fine}
    ) f WHERE ${AFTER}
  ),
  raw AS MATERIALIZED (
    SELECT * FROM (
      ${raw}
    ) r WHERE ${AFTER}
  ),
  keys AS MATERIALIZED (
    SELECT bucket, grp FROM main UNION SELECT bucket, grp FROM fine UNION SELECT bucket, grp FROM raw
    ORDER BY bucket, grp LIMIT $6
  ),
  last AS MATERIALIZED (SELECT bucket, grp FROM keys ORDER BY bucket DESC, grp DESC LIMIT 1),
  ex AS MATERIALIZED (
    SELECT DISTINCT bucket, grp FROM (SELECT bucket, grp FROM fine UNION ALL SELECT bucket, grp FROM raw) e WHERE ${UPTO}
  ),
  -- The whole buckets that fine or raw add to (the others are answered as stored).
  mx AS MATERIALIZED (SELECT * FROM main WHERE (bucket, grp) IN (SELECT bucket, grp FROM ex)),
  sums AS MATERIALIZED (
    SELECT bucket, grp, sum(requests) AS requests, sum(errors) AS errors, sum(fallbacks) AS fallbacks,
           COALESCE(sum(prompt_tokens), 0) AS prompt_tokens, COALESCE(sum(completion_tokens), 0) AS completion_tokens,
           COALESCE(sum(reasoning_tokens), 0) AS reasoning_tokens, COALESCE(sum(cost_usd), 0) AS cost_usd
    FROM (
      SELECT bucket, grp, ${POINT} FROM mx
      UNION ALL
      SELECT bucket, grp, ${POINT} FROM fine
      UNION ALL
      SELECT bucket, grp, 1, (status >= 400)::int, fallback_used::int, prompt_tokens, completion_tokens, reasoning_tokens, cost_usd::numeric FROM raw
    ) s
    WHERE ${UPTO}
    GROUP BY bucket, grp
  ),
  codes AS MATERIALIZED (
    SELECT bucket, grp, array_agg(code ORDER BY code) AS codes, array_agg(n ORDER BY code) AS counts
    FROM (
      SELECT bucket, grp, code, sum(n)::bigint AS n
      FROM (
        SELECT m.bucket, m.grp, c.code, c.n FROM mx m CROSS JOIN LATERAL unnest(m.error_codes, m.error_counts) AS c (code, n)
        UNION ALL
        SELECT f.bucket, f.grp, c.code, c.n FROM fine f CROSS JOIN LATERAL unnest(f.error_codes, f.error_counts) AS c (code, n)
        UNION ALL
        SELECT bucket, grp, COALESCE(error_code, 'unknown'), 1 FROM raw WHERE status >= 400
      ) c
      WHERE ${UPTO}
      GROUP BY bucket, grp, code
    ) c
    GROUP BY bucket, grp
  ),
  traffic AS MATERIALIZED (
    SELECT bucket, grp, array_agg(provider ORDER BY provider, model) AS providers, array_agg(model ORDER BY provider, model) AS models,
           array_agg(n ORDER BY provider, model) AS counts
    FROM (
      SELECT bucket, grp, provider, model, sum(n)::bigint AS n
      FROM (
        SELECT m.bucket, m.grp, t.provider, t.model, t.n
        FROM mx m CROSS JOIN LATERAL unnest(m.traffic_providers, m.traffic_models, m.traffic_counts) AS t (provider, model, n)
        UNION ALL
        SELECT f.bucket, f.grp, t.provider, t.model, t.n
        FROM fine f CROSS JOIN LATERAL unnest(f.traffic_providers, f.traffic_models, f.traffic_counts) AS t (provider, model, n)
        UNION ALL
        SELECT bucket, grp, selected_provider, selected_model, 1 FROM raw
      ) t
      WHERE ${UPTO}
      GROUP BY bucket, grp, provider, model
    ) t
    GROUP BY bucket, grp
  ),
  bins AS MATERIALIZED (
    SELECT bucket, grp, bin, sum(n) AS n, sum(total) AS total
    FROM (
      -- The whole bucket's own histogram, read by primary key, only where fine or raw add to it.
      SELECT e.bucket, e.grp, h.bin, h.n, h.total
      FROM ex e
      JOIN usage_rollups u ON u.org_id = $1 AND u.step = ${mainStep} AND u.dim = $2 AND u.bucket = e.bucket AND u.value = e.grp
      CROSS JOIN LATERAL unnest(u.latency_bins, u.latency_n, u.latency_sum) AS h (bin, n, total)
      WHERE ${inMain('e.bucket')}
      UNION ALL
      SELECT f.bucket, f.grp, h.bin, h.n, h.total
      FROM fine f CROSS JOIN LATERAL unnest(f.latency_bins, f.latency_n, f.latency_sum) AS h (bin, n, total)
      WHERE ${UPTO}
      UNION ALL
      SELECT bucket, grp, ${latencyBinSql('latency_ms')}, 1, latency_ms FROM raw WHERE status BETWEEN 200 AND 299 AND ${UPTO}
    ) b
    GROUP BY bucket, grp, bin
  )
  ${percentilesSql('pct', 'bins', ['bucket', 'grp'], [0.5, 0.9, 0.99])}
  -- The parts of each point, tagged and in the page's order, put together by the caller (joining them
  -- here would make the planner loop over one for each row of another): 0 a whole bucket as stored;
  -- for a point fine or raw add to, 1 its sums, 2 its percentiles, 3 its codes, 4 its traffic.
  SELECT * FROM (
    SELECT 0 AS part, bucket, grp, ${POINT}, latency_p50 AS p50, latency_p90 AS p90, latency_p99 AS p99,
           error_codes AS codes, error_counts AS code_counts, traffic_providers AS providers, traffic_models AS models, traffic_counts AS pair_counts
    FROM main WHERE ${UPTO}
    UNION ALL
    SELECT 1, bucket, grp, ${POINT}, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM sums
    UNION ALL
    SELECT 2, bucket, grp, NULL, NULL, NULL, NULL, NULL, NULL, NULL, p50, p90, p99, NULL, NULL, NULL, NULL, NULL FROM pct
    UNION ALL
    SELECT 3, bucket, grp, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, codes, counts, NULL, NULL, NULL FROM codes
    UNION ALL
    SELECT 4, bucket, grp, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, providers, models, counts FROM traffic
  ) x
  ORDER BY bucket, grp, part`;
  return { sql, params };
}

/** One part of a point (build's final SELECT): 0 a whole bucket as stored; 1 sums, 2 percentiles, 3 codes, 4 traffic of a merged point. */
interface PartRow {
  part: number;
  bucket: Date | string;
  grp: string;
  requests: string | number | null;
  errors: string | number | null;
  fallbacks: string | number | null;
  prompt_tokens: string | number | null;
  completion_tokens: string | number | null;
  reasoning_tokens: string | number | null;
  cost_usd: string | number | null;
  p50: number | null;
  p90: number | null;
  p99: number | null;
  codes: string[] | null;
  code_counts: Array<string | number> | null;
  providers: Array<string | null> | null;
  models: Array<string | null> | null;
  pair_counts: Array<string | number> | null;
}

/*
 * Most counts first, as the raw reader orders them; a tie keeps the order the arrays were built in,
 * which is SQL's (array_agg ORDER BY code / provider, model, in the database's collation): the raw
 * reader's second key.
 */
const byCountDesc = <T extends { n: number }>(xs: T[]): T[] => xs.sort((a, b) => b.n - a.n);

/** The points, in the statement's order, each put together from its parts. */
function assemble(rows: readonly PartRow[]): UsageRow[] {
  const out: UsageRow[] = [];
  let key = '';
  let point: UsageRow | null = null;
  for (const r of rows) {
    const bucket = r.bucket instanceof Date ? r.bucket : new Date(r.bucket);
    const k = `${bucket.getTime()}\u0000${r.grp}`;
    if (k !== key || point === null) {
      key = k;
      point = {
        bucket,
        group: r.grp,
        requests: 0,
        errors: 0,
        errorsByCode: [],
        promptTokens: 0,
        completionTokens: 0,
        reasoningTokens: 0,
        costUsd: 0,
        latencyP50Ms: null,
        latencyP90Ms: null,
        latencyP99Ms: null,
        fallbacks: 0,
        traffic: [],
      };
      out.push(point);
    }
    if (r.part === 0 || r.part === 1) {
      Object.assign(point, {
        requests: Number(r.requests),
        errors: Number(r.errors),
        fallbacks: Number(r.fallbacks),
        promptTokens: Number(r.prompt_tokens),
        completionTokens: Number(r.completion_tokens),
        reasoningTokens: Number(r.reasoning_tokens),
        costUsd: Number(r.cost_usd),
      });
    }
    if (r.part === 0 || r.part === 2) Object.assign(point, { latencyP50Ms: num(r.p50), latencyP90Ms: num(r.p90), latencyP99Ms: num(r.p99) });
    if (r.part === 0 || r.part === 3) {
      const counts = r.code_counts ?? [];
      point.errorsByCode = byCountDesc((r.codes ?? []).map((code, i) => ({ code, n: Number(counts[i]) }))).map(({ code, n }) => ({ code, count: n }));
    }
    if (r.part === 0 || r.part === 4) {
      const models = r.models ?? [];
      const counts = r.pair_counts ?? [];
      point.traffic = byCountDesc((r.providers ?? []).map((provider, i) => ({ provider, model: models[i], n: Number(counts[i]) }))).map(({ provider, model, n }) => ({ provider, model, requests: n }));
    }
  }
  return out;
}

const num = (v: number | string | null): number | null => (v === null ? null : Number(v));

/**
 * Usage from the rollups (docs/architecture.md "Usage from rollups"): the reader behind
 * `GET /v1/admin/usage`, exact to the last committed trace. Also brings the rollups up to date for
 * the job (UsageRollupJob).
 */
@Injectable()
export class UsageRollupRepository extends UsageReader {
  /** The figures are the decision traces', read through their rollups: the same answer the raw reader gives. */
  readonly source = 'decision_traces';
  private readonly rollups = new UsageRollups();

  constructor(
    private readonly sql: SqlStore,
    private readonly config: AppConfig,
  ) {
    super();
  }

  /** `retention.rollups_days` in seconds; null: kept forever. */
  private get keepSeconds(): number | null {
    const days = this.config.gateway.retention.rollups_days;
    return days === null ? null : days * 86_400;
  }

  /** One beat: the traces written since the last one, and the backfill's next chunks. */
  catchUp(backfill?: BackfillLimits): Promise<UsageRollupsView> {
    return this.sql.transaction((tx) => this.rollups.catchUp(tx, { keepSeconds: this.keepSeconds, backfill }));
  }

  async series(q: UsageQuery): Promise<UsageRow[]> {
    // Points before the cursor's bucket need not be read at all.
    const from = q.after && q.after.bucketMs > q.from.getTime() ? q.after.bucketMs : q.from.getTime();
    // Hour and day rows are whole for buckets that start within retention.rollups_days of now:
    // retention deletes a bucket only once all of it is older (src/retention/rollups-retention.ts).
    const keep = this.keepSeconds;
    const rollupFrom = keep === null ? -Infinity : Date.now() - keep * 1000;
    return this.sql.transaction(async (tx) => {
      // The rollups' state and rows in one snapshot: a beat committing meanwhile cannot make a trace
      // count twice (in a row and in the tail) or not at all.
      await tx.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY', []);
      const coverage = await this.rollups.coverage(tx);
      const segments = segmentsOf(from, q.to.getTime(), q.step, {
        minuteFrom: coverage?.minuteFrom?.getTime() ?? null,
        rollupFrom: coverage ? rollupFrom : Infinity,
      });
      const { sql, params } = build(q, from, segments, coverage);
      const { rows } = await tx.query<PartRow>(sql, params);
      return assemble(rows);
    });
  }
}
