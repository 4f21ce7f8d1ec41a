/**
 * OpenAI Chat Completions and Embeddings wire types, with the
 * additions of the compatible families. Used only inside this folder. Everything read from an
 * upstream is optional: compatible servers differ in what they leave out.
 */
import type { ChatMessage } from '../provider-adapter';

/**
 * A request message as sent: the gateway's normalised message is OpenAI's chat message (roles,
 * content parts, tool calls), so the one type serves both; the mapper only drops or renames what a
 * compatible family does not take.
 */
export type WireMessage = ChatMessage;

export type WireToolChoice = 'none' | 'auto' | 'required' | 'any' | { type: 'function'; function: { name: string } };

export interface WireChatRequest {
  /** Absent on Azure deployment URLs, where the deployment in the path picks the model. */
  model?: string;
  messages: WireMessage[];
  stream?: true;
  stream_options?: { include_usage: true };
  max_completion_tokens?: number;
  max_tokens?: number;
  temperature?: number;
  top_p?: number;
  frequency_penalty?: number;
  presence_penalty?: number;
  stop?: string[];
  seed?: number;
  random_seed?: number;
  n?: number;
  user?: string;
  response_format?: { type: 'json_object' | 'text' } | { type: 'json_schema'; json_schema: { name: string; description?: string; schema: Record<string, unknown>; strict?: boolean } };
  tools?: { type: 'function'; function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean } }[];
  tool_choice?: WireToolChoice;
  parallel_tool_calls?: boolean;
  reasoning_effort?: string;
  /** OpenRouter's reasoning object. */
  reasoning?: { effort: string };
}

export interface WireUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
  completion_tokens_details?: { reasoning_tokens?: number } | null;
  /** Groq timing, seconds. */
  queue_time?: number;
  prompt_time?: number;
  completion_time?: number;
  total_time?: number;
}

/** Groq's extension object on responses and chunks. */
export interface WireXGroq {
  id?: string;
  seed?: number;
  usage?: WireUsage | null;
  error?: unknown;
}

/** Mistral's Magistral answers can carry content as an array of chunks (unverified). */
export type WireResponseContent =
  | string
  | null
  | ({ type: 'text'; text: string } | { type: 'thinking'; thinking: { type: 'text'; text: string }[] } | { type: string })[];

export interface WireResponseToolCall {
  id?: string;
  type?: 'function';
  /** A string per the spec; some compatible servers send an object. */
  function: { name: string; arguments: string | Record<string, unknown> };
}

export interface WireChatCompletion {
  id?: string;
  object?: string;
  model?: string;
  choices?: {
    index?: number;
    message?: {
      role?: string;
      content?: WireResponseContent;
      reasoning_content?: string | null;
      reasoning?: string | null;
      tool_calls?: WireResponseToolCall[] | null;
    };
    finish_reason?: string | null;
  }[];
  usage?: WireUsage | null;
  x_groq?: WireXGroq | null;
  error?: WireErrorObject | string;
}

export interface WireToolCallDelta {
  index?: number;
  id?: string;
  type?: 'function';
  function?: { name?: string; arguments?: string };
}

export interface WireChunk {
  id?: string;
  object?: string;
  choices?: {
    index?: number;
    delta?: {
      role?: string;
      content?: string | null;
      reasoning_content?: string | null;
      reasoning?: string | null;
      tool_calls?: WireToolCallDelta[] | null;
    } | null;
    finish_reason?: string | null;
  }[];
  usage?: WireUsage | null;
  x_groq?: WireXGroq | null;
  /** An error after the 200 (OpenRouter also sets finish_reason "error"). */
  error?: WireErrorObject | string;
}

/** `{error: {...}}` (OpenAI; Azure adds `status` and `innererror`). */
export interface WireErrorObject {
  message?: string;
  type?: string | null;
  param?: string | null;
  /** A string for OpenAI; OpenRouter and vLLM put the HTTP status here as a number. */
  code?: string | number | null;
  status?: number;
  innererror?: { code?: string };
}

/** Every error body shape seen from the compatible families. */
export interface WireErrorBody {
  error?: WireErrorObject | string;
  object?: string;
  message?: string;
  type?: string;
  code?: string | number | null;
  detail?: unknown;
}

export interface WireEmbeddingRequest {
  model?: string;
  input: string[];
  encoding_format: 'float';
  dimensions?: number;
  user?: string;
}

export interface WireEmbeddingResponse {
  data?: { index?: number; embedding: number[] | string }[];
  usage?: { prompt_tokens?: number; total_tokens?: number };
}
