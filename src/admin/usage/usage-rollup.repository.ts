import { Injectable } from '@nestjs/common';
import { AppConfig } from '../../config/app-config';
import { latencyBinSql, percentilesSql } from '../../learning/rollups/latency-histogram';
import { BackfillLimits, BUCKET_ORIGIN_SQL } from '../../learning/rollups/rollup-state';
import { SqlStore } from '../../stores/sql/sql-store';
import { GROUP_COLUMN, toUsageRow, UsagePointRow } from './trace-usage.repository';
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
 *   keys     the page: the first $6 (bucket, group) of all three after the cursor. A point in the
 *            page is among the first $6 of main if main has it, so main's limit loses none;
 *   ex       the points that fine or raw add to: their percentiles are read from the merged
 *            histograms (main's own read by primary key), the others' are main's as stored.
 *
 * $1 organisation, $2 dimension ('' ungrouped); the segments' bounds and the tail's bounds follow.
 * Every fragment is a constant chosen by the validated step and group, never text of the request.
 */
const POINT = `requests, errors, fallbacks, prompt_tokens, completion_tokens, reasoning_tokens, cost_usd`;
const ARRAYS = `error_codes, error_counts, traffic_providers, traffic_models, traffic_counts`;
const AFTER = `($4::timestamptz IS NULL OR (bucket, grp) > ($4::timestamptz, $5::text))`;
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

  const sql = `
  WITH main AS (
    ${main}
  ),
  fine AS (
    SELECT * FROM (
      ${fine}
    ) f WHERE ${AFTER}
  ),
  raw AS (
    SELECT * FROM (
      ${raw}
    ) r WHERE ${AFTER}
  ),
  keys AS (
    SELECT bucket, grp FROM main UNION SELECT bucket, grp FROM fine UNION SELECT bucket, grp FROM raw
    ORDER BY bucket, grp LIMIT $6
  ),
  ex AS (
    SELECT bucket, grp, true AS merged FROM (SELECT bucket, grp FROM fine UNION SELECT bucket, grp FROM raw) e
  ),
  sums AS (
    SELECT bucket, grp, sum(requests) AS requests, sum(errors) AS errors, sum(fallbacks) AS fallbacks,
           COALESCE(sum(prompt_tokens), 0) AS prompt_tokens, COALESCE(sum(completion_tokens), 0) AS completion_tokens,
           COALESCE(sum(reasoning_tokens), 0) AS reasoning_tokens, COALESCE(sum(cost_usd), 0) AS cost_usd
    FROM keys JOIN (
      SELECT bucket, grp, ${POINT} FROM main
      UNION ALL
      SELECT bucket, grp, ${POINT} FROM fine
      UNION ALL
      SELECT bucket, grp, 1, (status >= 400)::int, fallback_used::int, prompt_tokens, completion_tokens, reasoning_tokens, cost_usd::numeric FROM raw
    ) s USING (bucket, grp)
    GROUP BY bucket, grp
  ),
  codes AS (
    SELECT bucket, grp, jsonb_agg(jsonb_build_object('code', code, 'count', n) ORDER BY n DESC, code) AS by_code
    FROM (
      SELECT bucket, grp, code, sum(n) AS n
      FROM keys JOIN (
        SELECT m.bucket, m.grp, c.code, c.n FROM main m CROSS JOIN LATERAL unnest(m.error_codes, m.error_counts) AS c (code, n)
        UNION ALL
        SELECT f.bucket, f.grp, c.code, c.n FROM fine f CROSS JOIN LATERAL unnest(f.error_codes, f.error_counts) AS c (code, n)
        UNION ALL
        SELECT bucket, grp, COALESCE(error_code, 'unknown'), 1 FROM raw WHERE status >= 400
      ) c USING (bucket, grp)
      GROUP BY bucket, grp, code
    ) c
    GROUP BY bucket, grp
  ),
  traffic AS (
    SELECT bucket, grp, jsonb_agg(jsonb_build_object('provider', provider, 'model', model, 'requests', n) ORDER BY n DESC, provider, model) AS by_pair
    FROM (
      SELECT bucket, grp, provider, model, sum(n) AS n
      FROM keys JOIN (
        SELECT m.bucket, m.grp, t.provider, t.model, t.n
        FROM main m CROSS JOIN LATERAL unnest(m.traffic_providers, m.traffic_models, m.traffic_counts) AS t (provider, model, n)
        UNION ALL
        SELECT f.bucket, f.grp, t.provider, t.model, t.n
        FROM fine f CROSS JOIN LATERAL unnest(f.traffic_providers, f.traffic_models, f.traffic_counts) AS t (provider, model, n)
        UNION ALL
        SELECT bucket, grp, selected_provider, selected_model, 1 FROM raw
      ) t USING (bucket, grp)
      GROUP BY bucket, grp, provider, model
    ) t
    GROUP BY bucket, grp
  ),
  bins AS (
    SELECT bucket, grp, bin, sum(n) AS n, sum(total) AS total
    FROM (
      SELECT m.bucket, m.grp, h.bin, h.n, h.total
      FROM main m JOIN ex USING (bucket, grp)
      JOIN usage_rollups u ON u.org_id = $1 AND u.step = ${mainStep} AND u.dim = $2 AND u.bucket = m.bucket AND u.value = m.grp
      CROSS JOIN LATERAL unnest(u.latency_bins, u.latency_n, u.latency_sum) AS h (bin, n, total)
      UNION ALL
      SELECT f.bucket, f.grp, h.bin, h.n, h.total
      FROM fine f JOIN keys USING (bucket, grp) CROSS JOIN LATERAL unnest(f.latency_bins, f.latency_n, f.latency_sum) AS h (bin, n, total)
      UNION ALL
      SELECT r.bucket, r.grp, ${latencyBinSql('r.latency_ms')}, 1, r.latency_ms
      FROM raw r JOIN keys USING (bucket, grp) WHERE r.status BETWEEN 200 AND 299
    ) b
    GROUP BY bucket, grp, bin
  )
  ${percentilesSql('pct', 'bins', ['bucket', 'grp'], [0.5, 0.9, 0.99])}
  SELECT s.bucket, s.grp, s.requests, s.errors, s.prompt_tokens, s.completion_tokens, s.reasoning_tokens, s.cost_usd, s.fallbacks,
         CASE WHEN ex.merged THEN pct.p50 ELSE m.latency_p50 END AS p50,
         CASE WHEN ex.merged THEN pct.p90 ELSE m.latency_p90 END AS p90,
         CASE WHEN ex.merged THEN pct.p99 ELSE m.latency_p99 END AS p99,
         codes.by_code, traffic.by_pair
  FROM sums s
  LEFT JOIN main m ON m.bucket = s.bucket AND m.grp = s.grp
  LEFT JOIN ex ON ex.bucket = s.bucket AND ex.grp = s.grp
  LEFT JOIN pct ON pct.bucket = s.bucket AND pct.grp = s.grp
  LEFT JOIN codes ON codes.bucket = s.bucket AND codes.grp = s.grp
  LEFT JOIN traffic ON traffic.bucket = s.bucket AND traffic.grp = s.grp
  ORDER BY s.bucket, s.grp`;
  return { sql, params };
}

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
      const { rows } = await tx.query<UsagePointRow>(sql, params);
      return rows.map(toUsageRow);
    });
  }
}
