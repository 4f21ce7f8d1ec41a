/**
 * Pure mapping from the OpenAI-compatible wire format to the gateway's normalised results: error
 * bodies, chat completions, stream chunks and embeddings, parameterised by the family's declared
 * variant (variants.ts). What a family answers differently (finish reasons, where reasoning text
 * and usage sit, error shapes) is read from its variant, never guessed from a model name.
 */
import { ownValue } from '../../common/own-key';
import type { ChatChoice, ChatResult, EmbeddingResult, StreamEvent, ToolCall, ToolCallDelta, UpstreamTiming, Usage } from '../provider-adapter';
import { UpstreamError } from '../upstream-error';
import { COMMON_FINISH_REASONS, FinishMapping, OpenAiVariant } from './variants';
import type {
  WireChatCompletion, WireChunk, WireEmbeddingResponse, WireErrorBody, WireErrorObject, WireResponseContent, WireResponseToolCall, WireUsage,
  WireXGroq,
} from './openai.wire';

/** Upstream text kept in an error's `detail` (logs only) is cut to this length. */
const DETAIL_MAX = 500;

// ---------------------------------------------------------------------------------------------
// Errors

export interface ParsedError {
  message: string;
  type?: string;
  code?: string;
  /** An HTTP status the body itself names (Azure `status`, OpenRouter/vLLM numeric `code`). */
  status?: number;
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
const httpStatus = (v: unknown): number | undefined => (typeof v === 'number' && Number.isInteger(v) && v >= 400 && v <= 599 ? v : undefined);
const cut = (s: string) => (s.length > DETAIL_MAX ? `${s.slice(0, DETAIL_MAX)}…` : s);

function fromErrorObject(e: WireErrorObject | string): ParsedError {
  if (typeof e === 'string') return { message: e };
  return {
    message: str(e.message) ?? JSON.stringify(e),
    type: str(e.type),
    code: str(e.code) ?? str(e.innererror?.code),
    status: httpStatus(e.status) ?? httpStatus(e.code),
  };
}

/**
 * Reads every error body shape of the compatible families: OpenAI
 * `{error:{message,type,param,code}}` (Azure adds `status`, `innererror`), top-level
 * `{object:"error",message,type,param,code}` (Mistral, older vLLM), `{error:"string"}` and
 * top-level `{message,type}` (Together), `{detail:…}`; anything else is kept as raw text.
 */
export function parseErrorBody(text: string): ParsedError {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { message: text.trim() };
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return { message: text.trim() };
  const b = body as WireErrorBody;
  if (b.error !== undefined && b.error !== null) return fromErrorObject(b.error);
  if (str(b.message)) return { message: b.message!, type: str(b.type), code: str(b.code), status: httpStatus(b.code) };
  if (b.detail !== undefined) return { message: typeof b.detail === 'string' ? b.detail : JSON.stringify(b.detail) };
  return { message: text.trim() };
}

function summarise(e: ParsedError): string {
  const label = [e.type, e.code].filter(Boolean).join('/');
  return cut(label ? `${label}: ${e.message}` : e.message);
}

/** A non-2xx answer before any stream byte. The body goes to `detail` (logs) only. */
export function statusError(status: number, bodyText: string, retryAfterMs?: number): UpstreamError {
  const e = parseErrorBody(bodyText);
  return new UpstreamError('status', `upstream answered ${status}: ${summarise(e)}`, { status, retryAfterMs, code: e.code });
}

/** An error reported after the 200 (in a chunk or a 200 JSON body). */
export function inBandError(error: WireErrorObject | string): UpstreamError {
  const e = fromErrorObject(error);
  const detail = `upstream reported an error after answering 200: ${summarise(e)}`;
  return e.status
    ? new UpstreamError('status', detail, { status: e.status, code: e.code })
    : new UpstreamError('protocol', detail, { code: e.code });
}

// ---------------------------------------------------------------------------------------------
// Responses

export function mapFinishReason(raw: string | null | undefined, variant: OpenAiVariant): FinishMapping {
  if (!raw) return 'stop';
  // The upstream chose the string: only the tables' own entries count.
  return ownValue(variant.finishReasons, raw) ?? ownValue(COMMON_FINISH_REASONS, raw) ?? 'stop';
}

function finishOrThrow(raw: string | null | undefined, variant: OpenAiVariant): ChatChoice['finish_reason'] {
  const f = mapFinishReason(raw, variant);
  if (f === 'error') throw new UpstreamError('protocol', `upstream finished with finish_reason "${raw}"`);
  return f;
}

const count = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined);

export function mapUsage(u: WireUsage | null | undefined): Usage | undefined {
  if (!u || typeof u !== 'object') return undefined;
  const prompt = count(u.prompt_tokens);
  const completion = count(u.completion_tokens);
  const total = count(u.total_tokens);
  if (prompt === undefined && completion === undefined && total === undefined) return undefined;
  const usage: Usage = {
    prompt_tokens: prompt ?? 0,
    completion_tokens: completion ?? 0,
    total_tokens: total ?? (prompt ?? 0) + (completion ?? 0),
  };
  const reasoning = count(u.completion_tokens_details?.reasoning_tokens);
  if (reasoning !== undefined) usage.reasoning_tokens = reasoning;
  return usage;
}

export function mapTiming(u: WireUsage | null | undefined): UpstreamTiming | undefined {
  if (!u || typeof u !== 'object') return undefined;
  const timing: UpstreamTiming = {};
  for (const k of ['queue_time', 'prompt_time', 'completion_time'] as const) {
    const v = count(u[k]);
    if (v !== undefined) timing[k] = v;
  }
  return Object.keys(timing).length ? timing : undefined;
}

/** Usage from top-level `usage`, else Groq's `x_groq.usage`; timing from wherever it is. */
function usageAndTiming(w: { usage?: WireUsage | null; x_groq?: WireXGroq | null }): { usage?: Usage; timing?: UpstreamTiming } {
  const groq = w.x_groq && typeof w.x_groq === 'object' ? w.x_groq.usage : undefined;
  return { usage: mapUsage(w.usage) ?? mapUsage(groq), timing: mapTiming(w.usage) ?? mapTiming(groq) };
}

function reasoningText(m: Partial<Record<'reasoning_content' | 'reasoning', string | null>>, variant: OpenAiVariant): string | undefined {
  for (const f of variant.reasoningFields) {
    const v = m[f];
    if (typeof v === 'string' && v !== '') return v;
  }
  return undefined;
}

/** String content, or Magistral's array of text and thinking chunks. */
function splitContent(content: WireResponseContent | undefined): { text: string | null; thinking?: string } {
  if (content === undefined || content === null) return { text: null };
  if (typeof content === 'string') return { text: content };
  let text = '';
  let thinking = '';
  for (const part of content) {
    if (part.type === 'text' && 'text' in part) text += part.text;
    else if (part.type === 'thinking' && 'thinking' in part) thinking += part.thinking.map((t) => t.text ?? '').join('');
  }
  return { text, thinking: thinking || undefined };
}

function toToolCall(t: WireResponseToolCall, i: number): ToolCall {
  const args = t.function?.arguments;
  return {
    id: t.id || `call_${i}`,
    type: 'function',
    function: { name: t.function?.name ?? '', arguments: typeof args === 'string' ? args : JSON.stringify(args ?? {}) },
  };
}

export function fromWireResponse(wire: WireChatCompletion, variant: OpenAiVariant): ChatResult {
  if (wire === null || typeof wire !== 'object') throw new UpstreamError('protocol', 'the response body is not a JSON object');
  if (wire.error !== undefined && wire.error !== null) throw inBandError(wire.error);
  if (!Array.isArray(wire.choices)) throw new UpstreamError('protocol', 'the response has no choices array');
  const choices = wire.choices.map((c, i): ChatChoice => {
    const m = c.message ?? {};
    const { text, thinking } = splitContent(m.content);
    const message: ChatChoice['message'] = { role: 'assistant', content: text };
    const toolCalls = Array.isArray(m.tool_calls) && m.tool_calls.length ? m.tool_calls.map(toToolCall) : undefined;
    if (toolCalls) message.tool_calls = toolCalls;
    const reasoning = reasoningText(m, variant) ?? thinking;
    if (reasoning !== undefined) message.reasoning_content = reasoning;
    return { index: typeof c.index === 'number' ? c.index : i, message, finish_reason: finishOrThrow(c.finish_reason, variant) };
  });
  choices.sort((a, b) => a.index - b.index);
  const { usage, timing } = usageAndTiming(wire);
  const result: ChatResult = { choices };
  if (usage) result.usage = usage;
  if (timing) result.timing = timing;
  return result;
}

// ---------------------------------------------------------------------------------------------
// Stream chunks

export interface MappedChunk {
  /** Deltas and finishes in wire order; usage is returned apart so the stream reports it once. */
  events: StreamEvent[];
  usage?: Usage;
  timing?: UpstreamTiming;
}

/**
 * One parsed `data:` payload → events. Tolerates `choices: []` (Azure's first chunk, the usage
 * chunk), `usage: null` on every chunk, and usage on the finish chunk, a separate chunk or in
 * Groq's `x_groq.usage`. An in-band error (`error` key, or finish_reason "error") throws.
 */
export function fromWireChunk(chunk: WireChunk, variant: OpenAiVariant): MappedChunk {
  if (chunk === null || typeof chunk !== 'object' || Array.isArray(chunk)) throw new UpstreamError('protocol', 'a stream event is not a JSON object');
  if (chunk.error !== undefined && chunk.error !== null) throw inBandError(chunk.error);
  const groqError = chunk.x_groq && typeof chunk.x_groq === 'object' ? chunk.x_groq.error : undefined;
  if (groqError) throw inBandError(groqError as WireErrorObject | string);
  const events: StreamEvent[] = [];
  for (const [i, c] of (Array.isArray(chunk.choices) ? chunk.choices : []).entries()) {
    const index = typeof c.index === 'number' ? c.index : i;
    const d = c.delta ?? {};
    const delta: Extract<StreamEvent, { type: 'delta' }> = { type: 'delta', index };
    if (typeof d.content === 'string' && d.content !== '') delta.content = d.content;
    const reasoning = reasoningText(d, variant);
    if (reasoning !== undefined) delta.reasoning = reasoning;
    if (Array.isArray(d.tool_calls) && d.tool_calls.length) {
      delta.tool_calls = d.tool_calls.map((t, j): ToolCallDelta => {
        const out: ToolCallDelta = { index: typeof t.index === 'number' ? t.index : j };
        if (t.id) out.id = t.id;
        if (t.type) out.type = t.type;
        if (t.function) {
          out.function = {};
          if (t.function.name) out.function.name = t.function.name;
          if (typeof t.function.arguments === 'string') out.function.arguments = t.function.arguments;
        }
        return out;
      });
    }
    if (delta.content !== undefined || delta.reasoning !== undefined || delta.tool_calls) events.push(delta);
    if (c.finish_reason) events.push({ type: 'finish', index, finish_reason: finishOrThrow(c.finish_reason, variant) });
  }
  return { events, ...usageAndTiming(chunk) };
}

// ---------------------------------------------------------------------------------------------
// Embeddings

/** `embedding` as packed little-endian float32 in base64. */
function decodeBase64Floats(s: string): number[] {
  const buf = Buffer.from(s, 'base64');
  const out: number[] = [];
  for (let i = 0; i + 4 <= buf.length; i += 4) out.push(buf.readFloatLE(i));
  return out;
}

export function fromWireEmbeddings(wire: WireEmbeddingResponse, inputs: number): EmbeddingResult {
  if (!wire || typeof wire !== 'object' || !Array.isArray(wire.data)) throw new UpstreamError('protocol', 'the embeddings response has no data array');
  const rows = wire.data.map((d, i) => ({ index: typeof d.index === 'number' ? d.index : i, embedding: d.embedding }));
  rows.sort((a, b) => a.index - b.index);
  if (rows.length !== inputs || rows.some((r, i) => r.index !== i)) {
    throw new UpstreamError('protocol', `the embeddings response has ${rows.length} vectors for ${inputs} inputs`);
  }
  const embeddings = rows.map((r) => {
    if (typeof r.embedding === 'string') return decodeBase64Floats(r.embedding);
    if (Array.isArray(r.embedding)) return r.embedding;
    throw new UpstreamError('protocol', 'an embedding is neither an array nor base64');
  });
  const prompt = count(wire.usage?.prompt_tokens) ?? 0;
  return { embeddings, usage: { prompt_tokens: prompt, total_tokens: count(wire.usage?.total_tokens) ?? prompt } };
}
