import { Injectable } from '@nestjs/common';
import { GatewayError } from '../common/errors/gateway-error';
import { RequestScope, Served, StreamBrokenError } from '../common/http/responder';
import { parseSessionId } from '../common/http/session-id';
import type { TargetRef } from '../config/gateway-config';
import { type Admission, LimitsService } from '../limits/limits.service';
import type { ChatRequest, ChatResult, ProviderAdapter, StreamEvent, UpstreamTarget } from '../providers/provider-adapter';
import { UpstreamError } from '../providers/upstream-error';
import {
  CapabilityCheck,
  ClientGoneError,
  settleFailure,
  Dispatched,
  DispatcherService,
  providersUnavailable,
} from '../routing/dispatcher.service';
import { RoutingService } from '../routing/routing.service';
import type { RoutingDecision } from '../routing/routing.types';
import { buildDecisionTrace, TracedOutcome } from '../traces/decision-trace.builder';
import type { DecisionTrace } from '../traces/decision-trace';
import { DecisionTraceWriter } from '../traces/decision-trace.writer';
import { ExperimentRouter, ExperimentSplit } from '../experiments/experiment.router';
import { inlineProblem, SchemaInlineError } from '../providers/json-schema/json-schema';
import type { RequestTelemetry } from '../telemetry/request-telemetry';
import type { TraceHeaders } from '../telemetry/trace-context';
import type { ChatCall } from './chat-request';

/** Refuses a target whose family cannot take a field the request uses (docs/architecture.md "Capabilities, never model names"). */
export function capabilityCheck(req: ChatRequest): CapabilityCheck {
  const hasImages = req.messages.some((m) => Array.isArray(m.content) && m.content.some((p) => p.type === 'image_url'));
  const rf = req.response_format;
  // Whether the schema can be inlined is only worked out if a target needs it (Gemini's converted schema).
  let inlining: { problem?: SchemaInlineError } | undefined;
  const inlineable = (schema: Record<string, unknown>) => (inlining ??= { problem: inlineProblem(schema) });
  return (caps) => {
    if (req.tools && !caps.tools) return 'tools';
    if (req.n && req.n > 1 && !caps.multipleChoices) return 'n';
    if (req.seed !== undefined && !caps.seed) return 'seed';
    if (hasImages && !caps.images) return 'messages';
    if (rf?.type === 'json_object' && !caps.jsonMode) return 'response_format';
    if (rf?.type === 'json_schema') {
      if (!caps.jsonSchema) return 'response_format';
      const problem = caps.recursiveSchemas ? undefined : inlineable(rf.json_schema.schema).problem;
      if (problem) {
        return {
          param: 'response_format.json_schema.schema',
          message: `No provider for this model can take this response_format schema: ${problem.message}.`,
        };
      }
    }
    return undefined;
  };
}

const isOutput = (e: StreamEvent) =>
  e.type === 'finish' || (e.type === 'delta' && (e.content !== undefined || e.reasoning !== undefined || (e.tool_calls?.length ?? 0) > 0));

interface Opened {
  iterator: AsyncIterator<StreamEvent>;
  held: StreamEvent[];
}

/** What dispatch gets: the targets, the capability check, the client's signal, and whether routing already skipped the first choice for its open breaker. */
interface DispatchPlan {
  targets: TargetRef[];
  supports: CapabilityCheck;
  signal: AbortSignal;
  primarySkipped: boolean;
  /** The request's span, or the client's trace headers each upstream call carries. */
  telemetry?: RequestTelemetry;
}

/** What the chat pipeline answers with; the endpoint's encoder turns it into its wire format. */
export type ChatAnswer =
  | { stream: false; served: Served; result: ChatResult }
  /**
   * Held until the first output (so fallback stayed invisible); iterating it yields that output and
   * the rest as they arrive, and records the decision trace when it ends. A failure after the first
   * output is thrown as StreamBrokenError.
   */
  | { stream: true; served: Served; events: AsyncIterable<StreamEvent> };

/** The chat endpoints' own view of one request: which wire format asked, and how it names the fields a target can refuse. */
export interface ChatEndpoint {
  endpoint: Extract<DecisionTrace['endpoint'], 'chat' | 'responses'>;
  /** The endpoint's name for a chat request field (`messages` is `input` in the Responses API); absent = the chat name. */
  param?: (chatParam: string) => string;
}

const CHAT: ChatEndpoint = { endpoint: 'chat' };

interface Pending {
  scope: RequestScope;
  decision: RoutingDecision;
  split: ExperimentSplit;
  sessionId: string | null;
  started: bigint;
  outcome: TracedOutcome;
  call: ChatCall;
  /** What the limits charged up front; settled from the decision trace (README "Limits"). */
  admission?: Admission;
}

/**
 * The chat pipeline, one straight line for every chat wire format (chat completions, Responses):
 * validate → route → experiment split → limits → dispatch with fallback → a typed answer, and one
 * decision trace when the answer (or its stream) ends. It never writes to the client: the endpoint's
 * encoder does.
 */
@Injectable()
export class ChatService {
  constructor(
    private readonly routing: RoutingService,
    private readonly dispatcher: DispatcherService,
    private readonly limits: LimitsService,
    private readonly traces: DecisionTraceWriter,
    private readonly experiments: ExperimentRouter,
  ) {}

  async complete(scope: RequestScope, call: ChatCall, ep: ChatEndpoint = CHAT): Promise<ChatAnswer | null> {
    const started = process.hrtime.bigint();
    const sessionId = parseSessionId(scope.sessionHeader);
    const { caller, facts } = scope;
    const decision = this.routing.route({
      caller,
      model: call.model,
      messages: call.request.messages,
      inputs: call.inputs,
      sessionId,
      requestId: facts.requestId,
      mode: 'live',
      maxCompletionTokens: call.request.max_completion_tokens,
    });
    const outcome: TracedOutcome = { status: 200 };
    // Step 6 of the routing chain: an active experiment whose baseline is the selected pair may divert or mirror it.
    const split = await this.experiments.apply(caller, decision, sessionId, facts.requestId);
    const p: Pending = { scope, decision, split, sessionId, started, outcome, call };
    let streaming = false;
    try {
      // A firewall block is 400, no provider called, no prompt text in the error.
      if (decision.insight.firewallBlocked) throw new GatewayError('firewall_blocked');
      // Every limit of the request in one step; tokens and spend are charged from an estimate.
      p.admission = await this.limits.admit(caller, 'chat', () => this.limits.chatAsk(decision.messages, call.request.max_completion_tokens, split.plan), true);
      if (decision.plan.length === 0) throw providersUnavailable(decision.breakerOpen?.retryAfterMs);
      const request: ChatRequest = { ...call.request, messages: decision.messages };
      const supports = capabilityCheck(request);
      const plan: DispatchPlan = {
        targets: split.plan,
        supports: ep.param ? renamed(supports, ep.param) : supports,
        signal: scope.signal,
        primarySkipped: decision.breakerOpen?.primary ?? false,
        telemetry: facts.telemetry,
      };
      if (call.stream) {
        const answer = await this.stream(p, request, plan, supports, ep);
        streaming = true;
        return answer;
      }
      const d = await this.dispatch(plan, (adapter, target, trace) => adapter.chat(request, { target, signal: plan.signal, requestId: facts.requestId, trace }));
      outcome.dispatched = d;
      outcome.usage = d.value.usage;
      outcome.finishReason = d.value.choices[0]?.finish_reason;
      this.shadow(p, request, supports);
      return { stream: false, served: d, result: d.value };
    } catch (err) {
      settleFailure(outcome, err);
      // Only a client that went away gets here (anything else was rethrown): there is no one to answer.
      return null;
    } finally {
      // A stream's trace is recorded when its events end (see events()).
      if (!streaming) this.trace(p, ep);
    }
  }

  /** The dispatcher over the plan; the served target is a fallback too when routing skipped the primary (the dispatcher never saw it). */
  private async dispatch<T>(plan: DispatchPlan, attempt: (adapter: ProviderAdapter, target: UpstreamTarget, trace: TraceHeaders | undefined) => Promise<T>): Promise<Dispatched<T>> {
    const d = await this.dispatcher.run(plan.targets, plan.signal, plan.supports, attempt, plan.telemetry);
    if (plan.primarySkipped) d.fallbackUsed = true;
    return d;
  }

  private async stream(p: Pending, request: ChatRequest, plan: DispatchPlan, supports: CapabilityCheck, ep: ChatEndpoint): Promise<ChatAnswer> {
    const { signal } = plan;
    const requestId = p.scope.facts.requestId;
    // Fallback stays transparent until the first output: the stream is held until then (docs/api.md "Streaming").
    const d = await this.dispatch<Opened>(plan, async (adapter, target, trace) => {
      const iterator = (await adapter.chatStream(request, { target, signal, requestId, trace }))[Symbol.asyncIterator]();
      const held: StreamEvent[] = [];
      for (;;) {
        const r = await iterator.next();
        if (r.done) throw new UpstreamError('protocol', 'the stream ended before any output');
        held.push(r.value);
        if (isOutput(r.value)) return { iterator, held };
      }
    });
    p.outcome.dispatched = d;
    p.outcome.ttftMs = Number(process.hrtime.bigint() - p.started) / 1e6;
    return { stream: true, served: d, events: this.events(p, d.value, request, supports, ep) };
  }

  /**
   * The held events, then the rest as they arrive; usage and the finish reason are kept for the
   * trace on the way through, and the trace is recorded when the stream ends, however it ends.
   */
  private async *events(p: Pending, opened: Opened, request: ChatRequest, supports: CapabilityCheck, ep: ChatEndpoint): AsyncGenerator<StreamEvent> {
    const o = p.outcome;
    let whole = false;
    try {
      for (const e of opened.held) {
        observe(o, e);
        yield e;
      }
      for (;;) {
        const r = await opened.iterator.next();
        if (r.done) break;
        observe(o, r.value);
        yield r.value;
      }
      whole = true;
    } catch (err) {
      if (err instanceof ClientGoneError || p.scope.signal.aborted) {
        settleFailure(o, new ClientGoneError());
        throw new ClientGoneError();
      }
      if (!(err instanceof UpstreamError)) settleFailure(o, err);
      // After the first byte there is no fallback: the encoder writes one error event and closes.
      o.status = 502;
      o.errorCode = (err as UpstreamError).kind === 'timeout' ? 'upstream_timeout' : 'upstream_error';
      throw new StreamBrokenError(o.errorCode as 'upstream_timeout' | 'upstream_error');
    } finally {
      // The encoder stopped pulling before the end without an error of the stream's own: the client left.
      if (!whole && o.status === 200) settleFailure(o, new ClientGoneError());
      if (o.status === 200) this.shadow(p, request, supports);
      this.trace(p, ep);
    }
  }

  private shadow(p: Pending, request: ChatRequest, supports: CapabilityCheck): void {
    const { decision, split } = p;
    this.experiments.shadow(split, p.outcome.dispatched?.target, {
      caller: p.scope.caller,
      requestId: p.scope.facts.requestId,
      requestedModel: decision.requestedModel,
      route: decision.rule.name,
      strategy: decision.strategyId,
      request,
      supports,
    });
  }

  private trace(p: Pending, ep: ChatEndpoint): void {
    const { decision, split, scope } = p;
    const trace = buildDecisionTrace(
      {
        requestId: scope.facts.requestId,
        orgId: scope.caller.orgId,
        apiKeyId: scope.caller.keyId,
        sessionId: p.sessionId,
        endpoint: ep.endpoint,
        requestedModel: decision.requestedModel,
        route: decision.rule.name,
        strategy: decision.strategyId,
        candidates: decision.candidates.map((c) => ({ provider: c.provider, model: c.model, score: c.score })),
        filtered: decision.filtered.map((f) => ({ provider: f.provider, model: f.model, reason: f.reason })),
        experimentId: split.experimentId,
        telemetry: scope.facts.telemetry,
        genAi: { params: p.call.request, stream: p.call.stream, confidence: decision.insight.confidence },
      },
      p.outcome,
      this.experiments.traceArm(split, p.outcome.dispatched?.target),
      p.started,
    );
    this.traces.record(trace);
    this.limits.settle(scope.caller, p.admission, trace);
  }
}

function observe(o: TracedOutcome, e: StreamEvent): void {
  if (e.type === 'usage') o.usage = e.usage;
  else if (e.type === 'finish') o.finishReason = e.finish_reason;
}

/** A capability check that names the refused field as the endpoint's wire format does. */
function renamed(check: CapabilityCheck, param: (chatParam: string) => string): CapabilityCheck {
  return (caps) => {
    const lacking = check(caps);
    if (lacking === undefined) return undefined;
    if (typeof lacking === 'string') {
      const name = param(lacking);
      return { param: name, message: `No provider for this model supports ${name}.` };
    }
    return { param: param(lacking.param), message: lacking.message };
  };
}
