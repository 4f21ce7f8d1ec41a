import { ownValue } from '../common/own-key';
import { Injectable } from '@nestjs/common';
import { ContractBodyError } from '../common/errors/gateway-error';
import type { RequestScope, Served } from '../common/http/responder';
import { AppConfig } from '../config/app-config';
import { GatewayConfig, ModelSpec, resolveTarget, TargetRef } from '../config/gateway-config';
import { ConfigError } from '../config/schema';
import { parseSessionId } from '../common/http/session-id';
import { type Admission, LimitsService } from '../limits/limits.service';
import type { EmbeddingResult } from '../providers/provider-adapter';
import { ProviderRegistry } from '../providers/provider-registry';
import { CapabilityCheck, settleFailure, DispatcherService } from '../routing/dispatcher.service';
import { buildDecisionTrace, TracedOutcome } from '../traces/decision-trace.builder';
import { DecisionTraceWriter } from '../traces/decision-trace.writer';
import { EmbeddingsCall, parseEmbeddingsBody } from './embeddings-request';
import { modelNotSupportedBody } from './embeddings.mapper';

/**
 * A model of `type: embedding` served by a family without an embeddings API (Anthropic,
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

/** What the embeddings endpoint answers with; its controller writes it. */
export interface EmbeddingsAnswer {
  served: Served;
  call: EmbeddingsCall;
  result: EmbeddingResult;
}

/**
 * `POST /v1/embeddings` as a straight line: validate → resolve the model → limits → dispatch
 * with the chat path's fallback, breakers and timeouts → a typed answer, and one decision trace (no
 * input text: the trace type has no field for it). The controller writes the answer.
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

  async embed(scope: RequestScope, body: unknown): Promise<EmbeddingsAnswer | null> {
    const started = process.hrtime.bigint();
    // A model the key may not use is 403 before anything about the body (docs/api.md "Check order").
    this.limits.checkModel(scope.caller, body);
    const call = parseEmbeddingsBody(body);
    const sessionId = parseSessionId(scope.sessionHeader);
    const { caller, facts, signal } = scope;
    const plan = resolveEmbeddingModel(call.model, this.config.gateway.models);
    if (typeof plan === 'string') {
      facts.errorCode = 'model_not_found';
      throw new ContractBodyError(400, modelNotSupportedBody(plan));
    }
    const outcome: TracedOutcome = { status: 200 };
    let admission: Admission | undefined;
    try {
      admission = await this.limits.admit(caller, 'embeddings', () => this.limits.embeddingsAsk(call.request.input, plan));
      const d = await this.dispatcher.run(
        plan,
        signal,
        supportsEmbeddings,
        (adapter, target, trace) => {
          if (!adapter.embed) throw new Error(`family ${target.provider.family} has no embed()`);
          return adapter.embed(call.request, { target, signal, requestId: facts.requestId, trace });
        },
        facts.telemetry,
      );
      outcome.dispatched = d;
      outcome.usage = d.value.usage;
      return { served: d, call, result: d.value };
    } catch (err) {
      settleFailure(outcome, err);
      // Only a client that went away gets here (anything else was rethrown): there is no one to answer.
      return null;
    } finally {
      const trace = buildDecisionTrace(
        {
          requestId: facts.requestId,
          orgId: caller.orgId,
          apiKeyId: caller.keyId,
          sessionId,
          endpoint: 'embeddings',
          requestedModel: call.model,
          // The implicit single-target rule of a catalogue id, named as chat names it.
          route: `implicit:${call.model}`,
          strategy: 'direct',
          candidates: plan.map((t) => ({ provider: t.provider, model: t.model, score: null })),
          experimentId: null,
          telemetry: facts.telemetry,
          genAi: { params: call.request },
        },
        outcome,
        null,
        started,
      );
      this.traces.record(trace);
      this.limits.settle(caller, admission, trace);
    }
  }
}
