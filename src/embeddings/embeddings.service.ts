import { ownValue } from '../common/own-key';
import { clientGoneSignal, sendJson, setServedHeaders } from '../common/http/served-headers';
import { Injectable } from '@nestjs/common';
import type { Response } from 'express';
import { ContractBodyError } from '../common/errors/gateway-error';
import type { GatewayRequest } from '../common/http/request-context';
import { AppConfig } from '../config/app-config';
import { GatewayConfig, ModelSpec, resolveTarget, TargetRef } from '../config/gateway-config';
import { ConfigError } from '../config/schema';
import { parseSessionId } from '../common/http/session-id';
import { usageCost } from '../routing/strategies/cost';
import { LimitsService } from '../limits/limits.service';
import type { EmbeddingResult } from '../providers/provider-adapter';
import { ProviderRegistry } from '../providers/provider-registry';
import { CapabilityCheck, settleFailure, Dispatched, DispatcherService, DispatchOutcome, tracedAttempts } from '../routing/dispatcher.service';
import { DecisionTraceWriter } from '../traces/decision-trace.writer';
import { parseEmbeddingsBody } from './embeddings-request';
import { embeddingsBody, modelNotSupportedBody } from './embeddings.mapper';

/**
 * Issue 6: a model of `type: embedding` served by a family without an embeddings API (Anthropic,
 * and the OpenAI-compatible variants that declare none) stops start-up, naming the model's provider
 * field. The config loader is pure and knows no adapters, so the check lives here, beside the code
 * that relies on it (as RoutingService checks strategies). ModelSpec does not say which form the
 * file used: one target is reported as `provider`, several as `providers.<id>`.
 */
export function checkEmbeddingModels(gateway: GatewayConfig, registry: ProviderRegistry): void {
  for (const model of Object.values(gateway.models)) {
    if (model.type !== 'embedding') continue;
    for (const t of model.targets) {
      const upstream = registry.target({ provider: t.provider, model: model.id });
      const adapter = registry.adapterFor(upstream.provider);
      if (adapter.embed && adapter.capabilities(upstream).embeddings) continue;
      const path = model.targets.length === 1 ? `models.${model.id}.provider` : `models.${model.id}.providers.${t.provider}`;
      throw new ConfigError(path, `provider "${t.provider}" (family ${upstream.provider.family}) has no embeddings API, so it cannot serve the embedding model "${model.id}"`);
    }
  }
}

/**
 * The targets of an embeddings request, in the order they are tried: a catalogue id of
 * `type: embedding` (each of its providers in order) or `provider/model`. Route aliases and comma
 * lists are chat routing and are not taken here. A string is the reason the model cannot be served.
 */
export function resolveEmbeddingModel(name: string, models: Readonly<Record<string, ModelSpec>>): TargetRef[] | string {
  const resolved = resolveTarget(name, models);
  if (typeof resolved === 'string' || resolved.length === 0) return `The model "${name}" does not exist.`;
  const plan = resolved.filter((t) => ownValue(models, t.model)?.type === 'embedding');
  if (plan.length === 0) return `The model "${name}" is not an embedding model.`;
  return plan;
}

/** Every target of an embedding model passed the start-up check; this guards the dispatcher's contract. */
const supportsEmbeddings: CapabilityCheck = (caps) => (caps.embeddings ? undefined : 'model');

interface Outcome extends DispatchOutcome {
  dispatched?: Dispatched<EmbeddingResult>;
}

/**
 * `POST /v1/embeddings` as a straight line: validate → resolve the model → rate limit → dispatch
 * with the chat path's fallback, breakers and timeouts → map → respond, then one decision trace
 * (no input text: the trace type has no field for it).
 */
@Injectable()
export class EmbeddingsService {
  constructor(
    private readonly config: AppConfig,
    registry: ProviderRegistry,
    private readonly dispatcher: DispatcherService,
    private readonly limits: LimitsService,
    private readonly traces: DecisionTraceWriter,
  ) {
    checkEmbeddingModels(config.gateway, registry);
  }

  async embed(req: GatewayRequest, body: unknown, res: Response): Promise<void> {
    const started = process.hrtime.bigint();
    const call = parseEmbeddingsBody(body);
    const sessionId = parseSessionId(req.headers['gateway-session-id']);
    const caller = req.caller!;
    const plan = resolveEmbeddingModel(call.model, this.config.gateway.models);
    if (typeof plan === 'string') {
      req.facts.errorCode = 'model_not_found';
      throw new ContractBodyError(400, modelNotSupportedBody(plan));
    }
    const outcome: Outcome = { status: 200 };
    try {
      await this.limits.checkKeyRate(caller, 'embeddings');
      const signal = clientGoneSignal(res);
      const d = await this.dispatcher.run(plan, signal, supportsEmbeddings, (adapter, target) => {
        if (!adapter.embed) throw new Error(`family ${target.provider.family} has no embed()`);
        return adapter.embed(call.request, { target, signal, requestId: req.facts.requestId });
      });
      outcome.dispatched = d;
      setServedHeaders(req, res, d.target, d.fallbackUsed);
      sendJson(res, 200, embeddingsBody(d.target.model, d.value, call.encodingFormat));
    } catch (err) {
      settleFailure(outcome, err);
    } finally {
      this.trace(req, call.model, plan, sessionId, outcome, started);
    }
  }

  private trace(req: GatewayRequest, requestedModel: string, plan: TargetRef[], sessionId: string | null, o: Outcome, started: bigint): void {
    const d = o.dispatched;
    const usage = d?.value.usage;
    this.traces.record({
      requestId: req.facts.requestId,
      orgId: req.caller!.orgId,
      apiKeyId: req.caller!.keyId,
      sessionId,
      endpoint: 'embeddings',
      requestedModel,
      // The implicit single-target rule of a catalogue id, named as chat names it.
      route: `implicit:${requestedModel}`,
      strategy: 'direct',
      candidates: plan.map((t) => ({ provider: t.provider, model: t.model, score: null })),
      selectedProvider: d?.target.provider ?? null,
      selectedModel: d?.target.model ?? null,
      fallbackUsed: d?.fallbackUsed ?? false,
      ...tracedAttempts(o),
      experimentId: null,
      experimentArm: null,
      status: o.status,
      errorCode: o.errorCode ?? null,
      latencyMs: Number(process.hrtime.bigint() - started) / 1e6,
      ttftMs: null,
      promptTokens: usage?.prompt_tokens ?? null,
      completionTokens: null,
      reasoningTokens: null,
      costUsd: usageCost(d?.upstream.model, usage),
      finishReason: null,
      createdAt: new Date(),
    });
  }
}
