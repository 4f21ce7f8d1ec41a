import { Injectable } from '@nestjs/common';
import { GatewayError } from '../../common/errors/gateway-error';
import type { Caller } from '../../common/http/request-context';
import { StoreFallback } from '../../resilience/store-fallback';
import { AdminQuery } from '../common/admin-query';
import { fromAnalytics } from '../common/admin-store';
import { decodeCursor, pageOf } from '../common/cursor';
import { STEP_MS, USAGE_GROUPS, USAGE_STEPS, UsageGroup, UsageReader, UsageRow } from './usage-reader';

/** The most buckets one query may span (docs/api.md "Admin API", usage). */
export const MAX_POINTS = 10_000;
const DEFAULT_SPAN_MS = 86_400_000;

export interface UsagePointJson {
  /** Start of the bucket, ISO 8601 UTC. */
  t: string;
  /** The group's value (`{"model": "…"}`, `{"status": 200}`, …; null where the trace has none); null when not grouped. */
  group: Record<string, string | number | null> | null;
  requests: number;
  errors: number;
  errors_by_code: Array<{ code: string; count: number }>;
  tokens: { prompt: number; completion: number; reasoning: number };
  cost_usd: number;
  latency_ms: { p50: number | null; p90: number | null; p99: number | null };
  fallbacks: number;
  /** Share of the point's requests per (provider, model) selected; `provider` and `model` null for requests none was selected for. */
  traffic_share: Array<{ provider: string | null; model: string | null; requests: number; share: number }>;
}

export interface UsageJson {
  from: string;
  to: string;
  step: string;
  group_by: UsageGroup | null;
  /** What the figures are of: `decision_traces` (read through their rollups, the same answer). */
  source: string;
  data: UsagePointJson[];
  next_cursor: string | null;
}

/**
 * `GET /v1/admin/usage` (docs/api.md "Admin API", usage): the organisation's requests, errors by
 * code, tokens, cost, latency percentiles, fallbacks and traffic share per model, as a time series in
 * buckets of a minute, an hour or a day, optionally split by one dimension. Points are (bucket, group)
 * pairs with at least one request, in time order, paged like every list. One port (UsageReader) reads
 * them, from the usage rollups and the traces they have not taken in yet.
 */
@Injectable()
export class AdminUsageService {
  constructor(
    private readonly reader: UsageReader,
    private readonly fallback: StoreFallback,
  ) {}

  async series(caller: Caller, rawQuery: unknown): Promise<UsageJson> {
    const q = AdminQuery.parse(rawQuery, ['from', 'to', 'step', 'group_by', 'limit', 'cursor']);
    const { from, to, asGiven } = q.range(new Date(), DEFAULT_SPAN_MS);
    const step = q.oneOf('step', USAGE_STEPS) ?? 'hour';
    const groupBy = q.oneOf('group_by', USAGE_GROUPS) ?? null;
    const stepMs = STEP_MS[step];
    const points = Math.ceil(to.getTime() / stepMs) - Math.floor(from.getTime() / stepMs);
    if (points > MAX_POINTS) {
      throw new GatewayError('invalid_request', `This range in ${step} steps is ${points} points; at most ${MAX_POINTS}: use a larger step or a shorter range.`, { param: 'step' });
    }
    const { limit, cursor } = q.page();
    const scope = ['usage', caller.orgId, asGiven, step, groupBy];
    const after = decodeCursor(cursor, scope, ['int', 'text'] as const);
    const rows = await fromAnalytics(this.fallback, 'usage', () =>
      this.reader.series({ orgId: caller.orgId, from, to, step, groupBy, after: after ? { bucketMs: Number(after[0]), group: after[1] } : null, limit: limit + 1 }),
    );
    const page = pageOf(rows, limit, scope, (r) => [String(r.bucket.getTime()), r.group], (r) => toPoint(r, groupBy));
    return { from: from.toISOString(), to: to.toISOString(), step, group_by: groupBy, source: this.reader.source, ...page };
  }
}

function toPoint(r: UsageRow, groupBy: UsageGroup | null): UsagePointJson {
  return {
    t: r.bucket.toISOString(),
    group: groupOf(r.group, groupBy),
    requests: r.requests,
    errors: r.errors,
    errors_by_code: r.errorsByCode,
    tokens: { prompt: r.promptTokens, completion: r.completionTokens, reasoning: r.reasoningTokens },
    cost_usd: r.costUsd,
    latency_ms: { p50: r.latencyP50Ms, p90: r.latencyP90Ms, p99: r.latencyP99Ms },
    fallbacks: r.fallbacks,
    traffic_share: r.traffic.map((x) => ({ ...x, share: r.requests > 0 ? x.requests / r.requests : 0 })),
  };
}

function groupOf(value: string, groupBy: UsageGroup | null): UsagePointJson['group'] {
  if (groupBy === null) return null;
  if (groupBy === 'status') return { status: Number(value) };
  return { [groupBy]: value === '' ? null : value };
}
