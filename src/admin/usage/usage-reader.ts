/**
 * The one port behind `GET /v1/admin/usage` (docs/api.md "Admin API", usage). Served from the usage
 * rollups (UsageRollupRepository, docs/architecture.md "Usage from rollups"), with the raw decision
 * traces (TraceUsageRepository) as the tests' oracle: both give the same answer. A query is a time
 * range, a bucket width and one dimension, and a row is one (bucket, group) with sums, counts and
 * latency percentiles.
 */

export const USAGE_STEPS = ['minute', 'hour', 'day'] as const;
export type UsageStep = (typeof USAGE_STEPS)[number];
export const USAGE_GROUPS = ['model', 'provider', 'key', 'route', 'status'] as const;
export type UsageGroup = (typeof USAGE_GROUPS)[number];

export const STEP_MS: Record<UsageStep, number> = { minute: 60_000, hour: 3_600_000, day: 86_400_000 };

export interface UsageQuery {
  orgId: string;
  /** Half-open [from, to). */
  from: Date;
  to: Date;
  step: UsageStep;
  groupBy: UsageGroup | null;
  /** Rows after this (bucket start, group value) only; null for the first page. */
  after: { bucketMs: number; group: string } | null;
  limit: number;
}

export interface UsageRow {
  /** Start of the bucket (UTC, aligned to the step). */
  bucket: Date;
  /** The group's value as text ('' where the trace has none, e.g. no model was selected); '' when not grouped. */
  group: string;
  requests: number;
  /** Requests answered with an error status (4xx and 5xx), and their codes. */
  errors: number;
  errorsByCode: Array<{ code: string; count: number }>;
  promptTokens: number;
  completionTokens: number;
  reasoningTokens: number;
  costUsd: number;
  /** Percentiles over the successful (2xx) requests; null without any. */
  latencyP50Ms: number | null;
  latencyP90Ms: number | null;
  latencyP99Ms: number | null;
  fallbacks: number;
  /** Requests per (provider, model) that served or was selected; null pair = none was. */
  traffic: Array<{ provider: string | null; model: string | null; requests: number }>;
}

export abstract class UsageReader {
  /** Where the figures come from (said in the answer). */
  abstract readonly source: string;
  /** Rows ordered by (bucket, group), at most `limit`; only buckets with at least one request. */
  abstract series(q: UsageQuery): Promise<UsageRow[]>;
}
