import type { TraceRow } from './admin-traces.repository';

/** A trace in a search result (docs/api.md "Admin API", traces): ids, names, numbers and codes; no text of the request exists to show. */
export interface TraceSummaryJson {
  /** The trace's key, `<created_at in µs since the epoch>-<id>`: what GET /v1/admin/traces/{id} takes. */
  id: string;
  created_at: string;
  request_id: string;
  api_key_id: string;
  session_id: string | null;
  endpoint: string;
  requested_model: string;
  route: string | null;
  strategy: string | null;
  selected: { provider: string; model: string } | null;
  status: number;
  error_code: string | null;
  fallback_used: boolean;
  attempts: number;
  latency_ms: number;
  ttft_ms: number | null;
  tokens: { prompt: number | null; completion: number | null; reasoning: number | null };
  cost_usd: number | null;
  finish_reason: string | null;
  experiment: { id: string; arm: string | null } | null;
}

/** One trace in full: routing's candidates and scores, what it filtered and why, the failed attempts. */
export interface TraceDetailJson extends TraceSummaryJson {
  candidates: Array<{ provider: string; model: string; score: number | null }>;
  filtered: Array<{ provider: string; model: string; reason: string }>;
  failed_attempts: Array<{ provider: string; model: string; error: string; status: number | null }>;
}

export const traceKey = (r: Pick<TraceRow, 'atUs' | 'id'>): string => `${r.atUs}-${r.id}`;

export function toTraceSummaryJson(r: TraceRow): TraceSummaryJson {
  return {
    id: traceKey(r),
    created_at: r.createdAt.toISOString(),
    request_id: r.requestId,
    api_key_id: r.apiKeyId,
    session_id: r.sessionId,
    endpoint: r.endpoint,
    requested_model: r.requestedModel,
    route: r.route,
    strategy: r.strategy,
    selected: r.selectedProvider !== null && r.selectedModel !== null ? { provider: r.selectedProvider, model: r.selectedModel } : null,
    status: r.status,
    error_code: r.errorCode,
    fallback_used: r.fallbackUsed,
    attempts: r.attempts,
    latency_ms: r.latencyMs,
    ttft_ms: r.ttftMs,
    tokens: { prompt: r.promptTokens, completion: r.completionTokens, reasoning: r.reasoningTokens },
    cost_usd: r.costUsd,
    finish_reason: r.finishReason,
    experiment: r.experimentId !== null ? { id: r.experimentId, arm: r.experimentArm } : null,
  };
}

export function toTraceDetailJson(r: TraceRow): TraceDetailJson {
  return {
    ...toTraceSummaryJson(r),
    // Only the fields the repository stores are read back (no other key can ride along).
    candidates: (r.candidates ?? []).map((c) => ({ provider: c.provider, model: c.model, score: c.score ?? null })),
    filtered: (r.filtered ?? []).map((f) => ({ provider: f.provider, model: f.model, reason: f.reason })),
    failed_attempts: (r.failedAttempts ?? []).map((a) => ({ provider: a.provider, model: a.model, error: a.error, status: a.status ?? null })),
  };
}
