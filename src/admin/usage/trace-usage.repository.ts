import { Injectable } from '@nestjs/common';
import { SqlStore } from '../../stores/sql/sql-store';
import { STEP_MS, UsageGroup, UsageQuery, UsageReader, UsageRow } from './usage-reader';

/*
 * The dimension's column: a closed set of constant SQL fragments chosen by the validated `group_by`,
 * never text from the request. '' stands for "none" (a trace with no selected model, or no grouping)
 * so that groups compare and join without NULL's three-valued logic.
 */
export const GROUP_COLUMN: Record<UsageGroup | 'none', string> = {
  none: `''`,
  model: `COALESCE(selected_model, '')`,
  provider: `COALESCE(selected_provider, '')`,
  key: `api_key_id`,
  route: `COALESCE(route, '')`,
  status: `status::text`,
};

/*
 * One statement per page, on Postgres and PGlite alike (docs/api.md "Admin API", usage).
 *
 *   t        the organisation's traces in [$2, $3): a range on created_at, so only the partitions
 *            (UTC days) of the range are read (docs/architecture.md "Retention"); each in its bucket
 *            (date_bin over UTC, $4 the step) and group.
 *   agg      one row per (bucket, group) after the cursor ($5 bucket, $6 group), the first $7 of them:
 *            requests, errors (status ≥ 400), tokens, cost, fallbacks, and latency percentiles over the
 *            2xx requests.
 *   codes    the page's errors per code; traffic: its requests per (provider, model).
 * $1 organisation.
 */
function seriesSql(group: UsageGroup | null): string {
  const col = GROUP_COLUMN[group ?? 'none'];
  return `
  WITH t AS (
    SELECT date_bin($4::interval, created_at, timestamptz '2000-01-01 00:00:00+00') AS bucket, ${col} AS grp,
           status, error_code, prompt_tokens, completion_tokens, reasoning_tokens, cost_usd, latency_ms, fallback_used,
           selected_provider, selected_model
    FROM decision_traces
    WHERE org_id = $1 AND created_at >= $2::timestamptz AND created_at < $3::timestamptz
  ),
  agg AS (
    SELECT bucket, grp,
           count(*) AS requests,
           count(*) FILTER (WHERE status >= 400) AS errors,
           COALESCE(sum(prompt_tokens), 0) AS prompt_tokens,
           COALESCE(sum(completion_tokens), 0) AS completion_tokens,
           COALESCE(sum(reasoning_tokens), 0) AS reasoning_tokens,
           COALESCE(sum(cost_usd), 0) AS cost_usd,
           count(*) FILTER (WHERE fallback_used) AS fallbacks,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY latency_ms) FILTER (WHERE status BETWEEN 200 AND 299) AS p50,
           percentile_cont(0.9) WITHIN GROUP (ORDER BY latency_ms) FILTER (WHERE status BETWEEN 200 AND 299) AS p90,
           percentile_cont(0.99) WITHIN GROUP (ORDER BY latency_ms) FILTER (WHERE status BETWEEN 200 AND 299) AS p99
    FROM t
    GROUP BY bucket, grp
    HAVING $5::timestamptz IS NULL OR (bucket, grp) > ($5::timestamptz, $6::text)
    ORDER BY bucket, grp
    LIMIT $7
  ),
  codes AS (
    SELECT bucket, grp, jsonb_agg(jsonb_build_object('code', code, 'count', n) ORDER BY n DESC, code) AS by_code
    FROM (SELECT t.bucket, t.grp, COALESCE(t.error_code, 'unknown') AS code, count(*) AS n
          FROM t JOIN agg ON agg.bucket = t.bucket AND agg.grp = t.grp
          WHERE t.status >= 400 GROUP BY 1, 2, 3) c
    GROUP BY bucket, grp
  ),
  traffic AS (
    SELECT bucket, grp, jsonb_agg(jsonb_build_object('provider', provider, 'model', model, 'requests', n) ORDER BY n DESC, provider, model) AS by_pair
    FROM (SELECT t.bucket, t.grp, t.selected_provider AS provider, t.selected_model AS model, count(*) AS n
          FROM t JOIN agg ON agg.bucket = t.bucket AND agg.grp = t.grp
          GROUP BY 1, 2, 3, 4) p
    GROUP BY bucket, grp
  )
  SELECT agg.*, codes.by_code, traffic.by_pair
  FROM agg
  LEFT JOIN codes ON codes.bucket = agg.bucket AND codes.grp = agg.grp
  LEFT JOIN traffic ON traffic.bucket = agg.bucket AND traffic.grp = agg.grp
  ORDER BY agg.bucket, agg.grp`;
}

const STATEMENTS = new Map<UsageGroup | null, string>([null, ...(['model', 'provider', 'key', 'route', 'status'] as const)].map((g) => [g, seriesSql(g)]));

/** A usage point as both readers' SQL answers it (this one and usage-rollup.repository.ts). */
export interface UsagePointRow {
  bucket: Date | string;
  grp: string;
  requests: string | number;
  errors: string | number;
  prompt_tokens: string | number;
  completion_tokens: string | number;
  reasoning_tokens: string | number;
  cost_usd: string | number;
  fallbacks: string | number;
  p50: number | null;
  p90: number | null;
  p99: number | null;
  by_code: Array<{ code: string; count: number }> | string | null;
  by_pair: Array<{ provider: string | null; model: string | null; requests: number }> | string | null;
}

const json = <T>(v: T | string | null): T | null => (typeof v === 'string' ? (JSON.parse(v) as T) : v);
const numOrNull = (v: number | string | null): number | null => (v === null ? null : Number(v));

/** A point of either reader's SQL as the port's row. */
export function toUsageRow(r: UsagePointRow): UsageRow {
  return {
    bucket: r.bucket instanceof Date ? r.bucket : new Date(r.bucket),
    group: r.grp,
    requests: Number(r.requests),
    errors: Number(r.errors),
    errorsByCode: (json(r.by_code) ?? []).map((c) => ({ code: c.code, count: Number(c.count) })),
    promptTokens: Number(r.prompt_tokens),
    completionTokens: Number(r.completion_tokens),
    reasoningTokens: Number(r.reasoning_tokens),
    costUsd: Number(r.cost_usd),
    latencyP50Ms: numOrNull(r.p50),
    latencyP90Ms: numOrNull(r.p90),
    latencyP99Ms: numOrNull(r.p99),
    fallbacks: Number(r.fallbacks),
    traffic: (json(r.by_pair) ?? []).map((p) => ({ provider: p.provider, model: p.model, requests: Number(p.requests) })),
  };
}

/**
 * Usage from the raw decision traces (table `decision_traces`), seconds at volume: the oracle the
 * tests hold the rollups' reader (usage-rollup.repository.ts) to.
 */
@Injectable()
export class TraceUsageRepository extends UsageReader {
  readonly source = 'decision_traces';

  constructor(private readonly sql: SqlStore) {
    super();
  }

  async series(q: UsageQuery): Promise<UsageRow[]> {
    // Rows before the cursor's bucket need not be read at all.
    const from = q.after && q.after.bucketMs > q.from.getTime() ? new Date(q.after.bucketMs) : q.from;
    const { rows } = await this.sql.query<UsagePointRow>(STATEMENTS.get(q.groupBy)!, [
      q.orgId,
      from.toISOString(),
      q.to.toISOString(),
      `${STEP_MS[q.step] / 1000} seconds`,
      q.after ? new Date(q.after.bucketMs).toISOString() : null,
      q.after?.group ?? null,
      q.limit,
    ]);
    return rows.map(toUsageRow);
  }
}
