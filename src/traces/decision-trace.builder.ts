import { DispatchOutcome, tracedAttempts } from '../routing/dispatcher.service';
import { usageCost } from '../routing/strategies/cost';
import type { GenAiRequest } from '../telemetry/gen-ai';
import type { RequestTelemetry } from '../telemetry/request-telemetry';
import type { DecisionTrace } from './decision-trace';
import { newTraceId } from './trace-id';

/** What a request was before dispatch: who asked, on which endpoint, and what routing decided. */
export interface TraceRequest {
  requestId: string;
  orgId: string;
  apiKeyId: string;
  sessionId: string | null;
  endpoint: DecisionTrace['endpoint'];
  requestedModel: string;
  route: DecisionTrace['route'];
  strategy: DecisionTrace['strategy'];
  candidates: DecisionTrace['candidates'];
  filtered?: DecisionTrace['filtered'];
  experimentId: string | null;
  /** The request's span, built from this trace too (docs/architecture.md "OpenTelemetry traces"); absent when tracing is off. */
  telemetry?: RequestTelemetry;
  /** What only the span records: the sampling parameters and routing's confidence (never message text). */
  genAi?: GenAiRequest;
}

/** What dispatch and the answer made of it; tokens as far as the upstream reported them. */
export interface TracedOutcome extends DispatchOutcome {
  usage?: { prompt_tokens: number; completion_tokens?: number; reasoning_tokens?: number };
  finishReason?: string;
  ttftMs?: number;
}

/**
 * The one place a decision trace is assembled, for every endpoint (chat, Responses, embeddings), so
 * the learning loop and the stop rules read the same fields whichever wire format the client spoke.
 * `experimentArm` is the caller's (it depends on which target served, which only routing knows).
 */
export function buildDecisionTrace(r: TraceRequest, o: TracedOutcome, experimentArm: string | null, started: bigint): DecisionTrace {
  const d = o.dispatched;
  const createdAt = new Date();
  const trace: DecisionTrace = {
    id: newTraceId(createdAt.getTime()),
    requestId: r.requestId,
    orgId: r.orgId,
    apiKeyId: r.apiKeyId,
    sessionId: r.sessionId,
    endpoint: r.endpoint,
    requestedModel: r.requestedModel,
    route: r.route,
    strategy: r.strategy,
    candidates: r.candidates,
    filtered: r.filtered ?? null,
    selectedProvider: d?.target.provider ?? null,
    selectedModel: d?.target.model ?? null,
    fallbackUsed: d?.fallbackUsed ?? false,
    ...tracedAttempts(o),
    experimentId: r.experimentId,
    experimentArm,
    status: o.status,
    errorCode: o.errorCode ?? null,
    latencyMs: Number(process.hrtime.bigint() - started) / 1e6,
    ttftMs: o.ttftMs ?? null,
    promptTokens: o.usage?.prompt_tokens ?? null,
    completionTokens: o.usage?.completion_tokens ?? null,
    reasoningTokens: o.usage?.reasoning_tokens ?? null,
    costUsd: d ? usageCost(d.upstream.model, o.usage) : null,
    finishReason: o.finishReason ?? null,
    createdAt,
  };
  r.telemetry?.decided(trace, d?.upstream, r.genAi ?? {}, started);
  return trace;
}
