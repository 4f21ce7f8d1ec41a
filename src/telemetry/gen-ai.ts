import type { Attributes } from '@opentelemetry/api';
import type { ProviderFamily } from '../config/gateway-config.schema';
import type { DecisionTrace } from '../traces/decision-trace';

/**
 * Span attribute names: the OpenTelemetry GenAI semantic conventions (`gen_ai.*`, still in
 * development upstream, so kept here by name rather than imported from the incubating entry point),
 * the stable general ones (`error.type`, `http.*`, `server.*`), and the gateway's own under `gateway.`.
 */
export const ATTR = {
  operation: 'gen_ai.operation.name',
  provider: 'gen_ai.provider.name',
  requestModel: 'gen_ai.request.model',
  responseModel: 'gen_ai.response.model',
  inputTokens: 'gen_ai.usage.input_tokens',
  outputTokens: 'gen_ai.usage.output_tokens',
  reasoningTokens: 'gen_ai.usage.reasoning.output_tokens',
  finishReasons: 'gen_ai.response.finish_reasons',
  timeToFirstChunk: 'gen_ai.response.time_to_first_chunk',
  conversationId: 'gen_ai.conversation.id',
  maxTokens: 'gen_ai.request.max_tokens',
  temperature: 'gen_ai.request.temperature',
  topP: 'gen_ai.request.top_p',
  frequencyPenalty: 'gen_ai.request.frequency_penalty',
  presencePenalty: 'gen_ai.request.presence_penalty',
  seed: 'gen_ai.request.seed',
  choiceCount: 'gen_ai.request.choice.count',
  stream: 'gen_ai.request.stream',
  reasoningLevel: 'gen_ai.request.reasoning.level',
  outputType: 'gen_ai.output.type',
  dimensions: 'gen_ai.embeddings.dimension.count',
  errorType: 'error.type',
  httpMethod: 'http.request.method',
  httpRoute: 'http.route',
  httpStatus: 'http.response.status_code',
  serverAddress: 'server.address',
  serverPort: 'server.port',
  requestId: 'gateway.request_id',
  endpoint: 'gateway.endpoint',
  orgId: 'gateway.org.id',
  apiKeyId: 'gateway.api_key.id',
  route: 'gateway.route',
  strategy: 'gateway.strategy',
  candidates: 'gateway.candidates.count',
  confidence: 'gateway.confidence',
  gwProvider: 'gateway.provider',
  gwModel: 'gateway.model',
  fallbackUsed: 'gateway.fallback_used',
  attempts: 'gateway.attempts',
  failedAttempts: 'gateway.failed_attempts',
  attempt: 'gateway.attempt',
  experimentId: 'gateway.experiment.id',
  experimentArm: 'gateway.experiment.arm',
  costUsd: 'gateway.cost_usd',
} as const;

/** The event on a streamed request's span when its first output arrived. */
export const FIRST_TOKEN_EVENT = 'gateway.first_token';

/**
 * The request fields a span records: numbers and enums only. Message text, input text, stop
 * sequences and `user` are not in this type, so they cannot reach a span (docs/architecture.md
 * "No prompt text stored or logged"). A chat or embeddings request is passed as it is.
 */
export interface GenAiParams {
  temperature?: number;
  top_p?: number;
  max_completion_tokens?: number;
  frequency_penalty?: number;
  presence_penalty?: number;
  seed?: number;
  n?: number;
  reasoning_effort?: string;
  response_format?: { type: string };
  dimensions?: number;
}

/** What only the span records of a request, beside its decision trace. */
export interface GenAiRequest {
  params?: GenAiParams;
  stream?: boolean;
  /** Routing's confidence in its pick (the learning strategies), null where none was computed. */
  confidence?: number | null;
}

/** `gen_ai.operation.name` of an endpoint: the Responses API is a chat inference as much as chat completions. */
export const operationOf = (endpoint: DecisionTrace['endpoint']): string => (endpoint === 'embeddings' ? 'embeddings' : 'chat');

/** The GenAI conventions' `gen_ai.provider.name` of a family; a family they have no value for is named as configured. */
const PROVIDER_NAMES: Partial<Record<ProviderFamily, string>> = {
  azure: 'azure.ai.openai',
  gemini: 'gcp.gemini',
  mistral: 'mistral_ai',
};
export const providerNameOf = (family: ProviderFamily): string => PROVIDER_NAMES[family] ?? family;

/** The sampling parameters the client set, under their GenAI names. */
export function paramAttributes(a: Attributes, req: GenAiRequest): void {
  const p = req.params;
  if (req.stream !== undefined) a[ATTR.stream] = req.stream;
  if (p === undefined) return;
  if (p.max_completion_tokens !== undefined) a[ATTR.maxTokens] = p.max_completion_tokens;
  if (p.temperature !== undefined) a[ATTR.temperature] = p.temperature;
  if (p.top_p !== undefined) a[ATTR.topP] = p.top_p;
  if (p.frequency_penalty !== undefined) a[ATTR.frequencyPenalty] = p.frequency_penalty;
  if (p.presence_penalty !== undefined) a[ATTR.presencePenalty] = p.presence_penalty;
  if (p.seed !== undefined) a[ATTR.seed] = p.seed;
  if (p.n !== undefined && p.n !== 1) a[ATTR.choiceCount] = p.n;
  if (p.reasoning_effort !== undefined) a[ATTR.reasoningLevel] = p.reasoning_effort;
  if (p.response_format !== undefined) a[ATTR.outputType] = p.response_format.type === 'text' ? 'text' : 'json';
  if (p.dimensions !== undefined) a[ATTR.dimensions] = p.dimensions;
}

/** The decision trace's fields on the request's span: ids and numbers, as the trace itself holds them. */
export function decisionAttributes(a: Attributes, t: DecisionTrace): void {
  a[ATTR.operation] = operationOf(t.endpoint);
  a[ATTR.requestModel] = t.requestedModel;
  a[ATTR.requestId] = t.requestId;
  a[ATTR.endpoint] = t.endpoint;
  a[ATTR.orgId] = t.orgId;
  a[ATTR.apiKeyId] = t.apiKeyId;
  if (t.sessionId !== null) a[ATTR.conversationId] = t.sessionId;
  if (t.route !== null) a[ATTR.route] = t.route;
  if (t.strategy !== null) a[ATTR.strategy] = t.strategy;
  if (t.candidates !== null) a[ATTR.candidates] = t.candidates.length;
  if (t.selectedProvider !== null) a[ATTR.gwProvider] = t.selectedProvider;
  if (t.selectedModel !== null) a[ATTR.gwModel] = t.selectedModel;
  a[ATTR.fallbackUsed] = t.fallbackUsed;
  a[ATTR.attempts] = t.attempts;
  a[ATTR.failedAttempts] = t.failedAttempts?.length ?? 0;
  if (t.experimentId !== null) a[ATTR.experimentId] = t.experimentId;
  if (t.experimentArm !== null) a[ATTR.experimentArm] = t.experimentArm;
  usageAttributes(a, t);
  if (t.ttftMs !== null) a[ATTR.timeToFirstChunk] = t.ttftMs / 1000;
  if (t.costUsd !== null) a[ATTR.costUsd] = t.costUsd;
  if (t.errorCode !== null) a[ATTR.errorType] = t.errorCode;
}

/** Tokens and finish reason, as the upstream reported them. */
function usageAttributes(a: Attributes, t: DecisionTrace): void {
  if (t.promptTokens !== null) a[ATTR.inputTokens] = t.promptTokens;
  if (t.completionTokens !== null) a[ATTR.outputTokens] = t.completionTokens;
  if (t.reasoningTokens !== null) a[ATTR.reasoningTokens] = t.reasoningTokens;
  if (t.finishReason !== null) a[ATTR.finishReasons] = [t.finishReason];
}
