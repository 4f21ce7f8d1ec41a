import type { ModelSpec, ProviderSpec } from '../config/gateway-config';
import type { StructuredOutputMode } from '../config/gateway-config.schema';
import type { TraceHeaders } from '../telemetry/trace-context';

/**
 * The gateway's normalised chat request, as every adapter receives it: validated, templates filled,
 * `inputs` dropped, `max_tokens` folded into `max_completion_tokens`, no `model`, `stream` or
 * `stream_options` (the adapter is told whether to stream by which method is called).
 */
export interface ChatRequest {
  messages: ChatMessage[];
  temperature?: number;
  top_p?: number;
  max_completion_tokens?: number;
  frequency_penalty?: number;
  presence_penalty?: number;
  stop?: string[];
  reasoning_effort?: ReasoningEffort;
  response_format?: ResponseFormat;
  seed?: number;
  n?: number;
  user?: string;
  tools?: ToolDefinition[];
  tool_choice?: ToolChoice;
  parallel_tool_calls?: boolean;
}

export type ReasoningEffort = 'none' | 'low' | 'medium' | 'high';

/** OpenAI's `response_format.json_schema`: what structured-output clients (SDK `parse` helpers, `generateObject`) send. */
export interface JsonSchemaFormat {
  /** 1–64 characters of `[A-Za-z0-9_-]`. */
  name: string;
  description?: string;
  schema: Record<string, unknown>;
  strict?: boolean;
}

export type ResponseFormat = { type: 'json_object' | 'text' } | { type: 'json_schema'; json_schema: JsonSchemaFormat };

export type { StructuredOutputMode };
export type Role = 'system' | 'developer' | 'user' | 'assistant' | 'tool';

export interface ChatMessage {
  role: Role;
  /** A string, content parts (user: text/image_url/...; others: text), or null (assistant with tool calls). */
  content: string | ContentPart[] | null;
  name?: string;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
}

export type ContentPart =
  | { type: 'text'; text: string }
  | { type: 'image_url'; image_url: { url: string; detail?: 'auto' | 'low' | 'high' } };

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface ToolDefinition {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean };
}

export type ToolChoice = 'none' | 'auto' | 'required' | { type: 'function'; function: { name: string } };

export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter';

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** Reasoning tokens, included in completion_tokens (Gemini's thoughts are added by its adapter). */
  reasoning_tokens?: number;
}

/** Groq's timing fields, in seconds (contract headers Gateway-Queue/Prompt/Completion-Time). */
export interface UpstreamTiming {
  queue_time?: number;
  prompt_time?: number;
  completion_time?: number;
}

export interface ChatChoice {
  index: number;
  message: { role: 'assistant'; content: string | null; tool_calls?: ToolCall[]; reasoning_content?: string };
  finish_reason: FinishReason;
}

export interface ChatResult {
  choices: ChatChoice[];
  usage?: Usage;
  timing?: UpstreamTiming;
}

export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: 'function';
  function?: { name?: string; arguments?: string };
}

/** One step of a stream, normalised across families; the chat mapper turns these into contract chunks. */
export type StreamEvent =
  | { type: 'delta'; index: number; content?: string; reasoning?: string; tool_calls?: ToolCallDelta[] }
  | { type: 'finish'; index: number; finish_reason: FinishReason }
  | { type: 'usage'; usage: Usage; timing?: UpstreamTiming };

export interface ResolvedTimeouts {
  connectMs: number;
  firstTokenMs: number;
  idleMs: number;
  totalMs: number;
}

/** Where one attempt goes: the provider, the catalogue model, and the upstream name on the wire. */
export interface UpstreamTarget {
  provider: ProviderSpec;
  model: ModelSpec;
  upstream: string;
  timeouts: ResolvedTimeouts;
  maxResponseBytes: number;
  /** The configured `structured_output` of this model on this provider; absent = the family's default. */
  structuredOutput?: StructuredOutputMode;
}

export interface CallContext {
  target: UpstreamTarget;
  /** Aborted when the client disconnects or the gateway gives up; adapters pass it to the HTTP call. */
  signal: AbortSignal;
  requestId: string;
  /** W3C `traceparent`/`tracestate` for the upstream request, when the request is traced or the client sent them (docs/architecture.md "OpenTelemetry traces"). */
  trace?: TraceHeaders;
}

export interface EmbeddingRequest {
  input: string[];
  dimensions?: number;
  user?: string;
}

export interface EmbeddingResult {
  /** One vector per input, in input order. */
  embeddings: number[][];
  usage: { prompt_tokens: number; total_tokens: number };
}

/** What a family can take; a request field the family cannot take is refused (400) or the target skipped. */
export interface AdapterCapabilities {
  embeddings: boolean;
  tools: boolean;
  /** More than one choice (`n` > 1). */
  multipleChoices: boolean;
  seed: boolean;
  images: boolean;
  jsonMode: boolean;
  /** `response_format: json_schema` (for this target: its `structured_output` is not `none`). */
  jsonSchema: boolean;
  /** Whether a schema whose `$ref`s form a cycle can be sent (Gemini's converted schema inlines refs and cannot). */
  recursiveSchemas: boolean;
}

/**
 * A provider family: maps the normalised request to its wire format and
 * back. No retries, fallback, breakers or stores here: the routing layer owns those. Every failure is
 * an UpstreamError.
 */
export interface ProviderAdapter {
  capabilities(target: UpstreamTarget): AdapterCapabilities;
  chat(req: ChatRequest, ctx: CallContext): Promise<ChatResult>;
  /**
   * Resolves once the upstream answered 200 (so errors before the stream starts reject here and can
   * fall back); the iterable then yields events as they arrive and throws UpstreamError mid-stream.
   */
  chatStream(req: ChatRequest, ctx: CallContext): Promise<AsyncIterable<StreamEvent>>;
  embed?(req: EmbeddingRequest, ctx: CallContext): Promise<EmbeddingResult>;
}
