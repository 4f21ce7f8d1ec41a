import { Injectable } from '@nestjs/common';
import { once } from 'node:events';
import { randomUUID } from 'node:crypto';
import type { Response } from 'express';
import { GatewayError } from '../common/errors/gateway-error';
import type { GatewayRequest } from '../common/http/request-context';
import { clientGoneSignal, sendJson, setServedHeaders } from '../common/http/served-headers';
import { parseSessionId } from '../common/http/session-id';
import { usageCost } from '../routing/strategies/cost';
import type { TargetRef } from '../config/gateway-config';
import { LimitsService } from '../limits/limits.service';
import type { ChatRequest, ProviderAdapter, StreamEvent, UpstreamTarget, Usage } from '../providers/provider-adapter';
import { UpstreamError } from '../providers/upstream-error';
import {
  CapabilityCheck,
  ClientGoneError,
  settleFailure,
  Dispatched,
  DispatcherService,
  DispatchOutcome,
  providersUnavailable,
  tracedAttempts,
} from '../routing/dispatcher.service';
import { RoutingService } from '../routing/routing.service';
import type { RoutingDecision } from '../routing/routing.types';
import { DecisionTraceWriter } from '../traces/decision-trace.writer';
import { ExperimentRouter, ExperimentSplit } from '../experiments/experiment.router';
import { inlineProblem, SchemaInlineError } from '../providers/json-schema/json-schema';
import { ChatCall, parseChatBody } from './chat-request';
import { ChatIdentity, chunkBody, completionBody, TRAILER_NAMES, usageChunkBody, usageHeaders } from './chat.mapper';

/** Refuses a target whose family cannot take a field the request uses (issue 4 "Request handling"). */
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
}

interface Outcome extends DispatchOutcome {
  usage?: Usage;
  finishReason?: string;
  ttftMs?: number;
}

/**
 * `POST /v1/chat/completions` as a straight line (STYLE "What one feature looks like"): validate →
 * route → limits → dispatch with fallback → map → respond, then one decision trace.
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

  async complete(req: GatewayRequest, body: unknown, res: Response): Promise<void> {
    const started = process.hrtime.bigint();
    const call = parseChatBody(body);
    const sessionId = parseSessionId(req.headers['gateway-session-id']);
    const caller = req.caller!;
    const decision = this.routing.route({
      caller,
      model: call.model,
      messages: call.request.messages,
      inputs: call.inputs,
      sessionId,
      requestId: req.facts.requestId,
      mode: 'live',
      maxCompletionTokens: call.request.max_completion_tokens,
    });
    const outcome: Outcome = { status: 200 };
    // DESIGN §6 step 6: an active experiment whose baseline is the selected pair may divert or mirror it.
    const split = await this.experiments.apply(caller, decision, sessionId, req.facts.requestId);
    try {
      // DESIGN §5: a firewall block is 400, no provider called, no prompt text in the error.
      if (decision.insight.firewallBlocked) throw new GatewayError('firewall_blocked');
      await this.limits.checkKeyRate(caller, 'chat');
      await this.limits.checkMonthly(caller);
      if (decision.plan.length === 0) throw providersUnavailable(decision.breakerOpen?.retryAfterMs);
      const request: ChatRequest = { ...call.request, messages: decision.messages };
      const plan: DispatchPlan = {
        targets: split.plan,
        supports: capabilityCheck(request),
        signal: clientGoneSignal(res),
        primarySkipped: decision.breakerOpen?.primary ?? false,
      };
      if (call.stream) await this.stream(req, res, call, request, plan, outcome, started);
      else await this.json(req, res, request, plan, outcome);
      if (outcome.status === 200) {
        this.experiments.shadow(split, outcome.dispatched?.target, {
          caller,
          requestId: req.facts.requestId,
          requestedModel: decision.requestedModel,
          route: decision.rule.name,
          strategy: decision.strategyId,
          request,
          supports: plan.supports,
        });
      }
    } catch (err) {
      settleFailure(outcome, err);
    } finally {
      this.trace(req, decision, split, sessionId, outcome, started);
    }
  }

  /** The dispatcher over the plan; the served target is a fallback too when routing skipped the primary (the dispatcher never saw it). */
  private async dispatch<T>(plan: DispatchPlan, attempt: (adapter: ProviderAdapter, target: UpstreamTarget) => Promise<T>): Promise<Dispatched<T>> {
    const d = await this.dispatcher.run(plan.targets, plan.signal, plan.supports, attempt);
    if (plan.primarySkipped) d.fallbackUsed = true;
    return d;
  }

  private async json(req: GatewayRequest, res: Response, request: ChatRequest, plan: DispatchPlan, outcome: Outcome): Promise<void> {
    const d = await this.dispatch(plan, (adapter, target) => adapter.chat(request, { target, signal: plan.signal, requestId: req.facts.requestId }));
    outcome.dispatched = d;
    outcome.usage = d.value.usage;
    outcome.finishReason = d.value.choices[0]?.finish_reason;
    setServedHeaders(req, res, d.target, d.fallbackUsed);
    const h = usageHeaders(d.value.usage, d.value.timing);
    for (const [k, v] of Object.entries(h)) res.setHeader(k, v);
    sendJson(res, 200, completionBody(this.identity(d.target), d.value));
  }

  private async stream(
    req: GatewayRequest,
    res: Response,
    call: ChatCall,
    request: ChatRequest,
    plan: DispatchPlan,
    outcome: Outcome,
    started: bigint,
  ): Promise<void> {
    const { signal } = plan;
    // Fallback stays transparent until the first output: the stream is held until then (DESIGN §5).
    const d = await this.dispatch<Opened>(plan, async (adapter, target) => {
      const iterator = (await adapter.chatStream(request, { target, signal, requestId: req.facts.requestId }))[Symbol.asyncIterator]();
      const held: StreamEvent[] = [];
      for (;;) {
        const r = await iterator.next();
        if (r.done) throw new UpstreamError('protocol', 'the stream ended before any output');
        held.push(r.value);
        if (isOutput(r.value)) return { iterator, held };
      }
    });
    outcome.dispatched = d;
    outcome.ttftMs = Number(process.hrtime.bigint() - started) / 1e6;
    setServedHeaders(req, res, d.target, d.fallbackUsed);
    res.status(200);
    res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
    res.setHeader('Cache-Control', 'no-cache');
    res.setHeader('X-Accel-Buffering', 'no');
    res.setHeader('Trailer', TRAILER_NAMES.join(', '));
    req.socket.setNoDelay(true);
    res.flushHeaders();

    const idn = this.identity(d.target);
    let first = true;
    let timing;
    const write = async (payload: string) => {
      if (!res.write(payload)) await Promise.race([once(res, 'drain'), once(res, 'close')]);
      if (signal.aborted) throw new ClientGoneError();
    };
    const emit = async (e: StreamEvent) => {
      if (e.type === 'usage') {
        outcome.usage = e.usage;
        timing = e.timing;
        return;
      }
      if (e.type === 'finish') outcome.finishReason = e.finish_reason;
      const chunk = chunkBody(idn, e, first);
      first = false;
      if (chunk) await write(`data: ${JSON.stringify(chunk)}\n\n`);
    };
    try {
      for (const e of d.value.held) await emit(e);
      for (;;) {
        const r = await d.value.iterator.next();
        if (r.done) break;
        await emit(r.value);
      }
    } catch (err) {
      if (err instanceof ClientGoneError || signal.aborted) throw new ClientGoneError();
      if (!(err instanceof UpstreamError)) throw err;
      // After the first byte there is no fallback: one error event, then close without [DONE].
      outcome.status = 502;
      outcome.errorCode = err.kind === 'timeout' ? 'upstream_timeout' : 'upstream_error';
      const code = outcome.errorCode as 'upstream_timeout' | 'upstream_error';
      res.write(`data: ${JSON.stringify(new GatewayError(code, 'The upstream provider failed mid-stream.').toBody())}\n\n`);
      res.end();
      return;
    }
    if (call.includeUsage && outcome.usage) await write(`data: ${JSON.stringify(usageChunkBody(idn, outcome.usage, timing))}\n\n`);
    res.write('data: [DONE]\n\n');
    res.addTrailers(usageHeaders(outcome.usage, timing));
    res.end();
  }

  private identity(target: TargetRef): ChatIdentity {
    return { id: `chatcmpl-${randomUUID()}`, created: Math.floor(Date.now() / 1000), model: target.model };
  }

  private trace(req: GatewayRequest, decision: RoutingDecision, split: ExperimentSplit, sessionId: string | null, o: Outcome, started: bigint): void {
    const d = o.dispatched;
    this.traces.record({
      requestId: req.facts.requestId,
      orgId: req.caller!.orgId,
      apiKeyId: req.caller!.keyId,
      sessionId,
      endpoint: 'chat',
      requestedModel: decision.requestedModel,
      route: decision.rule.name,
      strategy: decision.strategyId,
      candidates: decision.candidates.map((c) => ({ provider: c.provider, model: c.model, score: c.score })),
      selectedProvider: d?.target.provider ?? null,
      selectedModel: d?.target.model ?? null,
      fallbackUsed: d?.fallbackUsed ?? false,
      ...tracedAttempts(o),
      experimentId: split.experimentId,
      experimentArm: this.experiments.traceArm(split, d?.target),
      status: o.status,
      errorCode: o.errorCode ?? null,
      latencyMs: Number(process.hrtime.bigint() - started) / 1e6,
      ttftMs: o.ttftMs ?? null,
      promptTokens: o.usage?.prompt_tokens ?? null,
      completionTokens: o.usage?.completion_tokens ?? null,
      reasoningTokens: o.usage?.reasoning_tokens ?? null,
      costUsd: d ? usageCost(d.upstream.model, o.usage) : null,
      finishReason: o.finishReason ?? null,
      createdAt: new Date(),
    });
  }
}
