import type { ChatResult, StreamEvent, Usage, UpstreamTiming } from '../providers/provider-adapter';

/** The contract's chat response and chunk shapes; one place decides field names. */
export interface ChatIdentity {
  id: string;
  created: number;
  /** The catalogue id of the model that served. */
  model: string;
}

export function usageBody(usage: Usage, timing?: UpstreamTiming): Record<string, unknown> {
  const body: Record<string, unknown> = {
    prompt_tokens: usage.prompt_tokens,
    completion_tokens: usage.completion_tokens,
    total_tokens: usage.total_tokens,
  };
  if (usage.reasoning_tokens !== undefined) body.completion_tokens_details = { reasoning_tokens: usage.reasoning_tokens };
  // Usage-derived values (docs/api.md "Streaming") also travel in the usage object (Groq's names).
  if (timing) Object.assign(body, timing);
  return body;
}

export function completionBody(idn: ChatIdentity, result: ChatResult): Record<string, unknown> {
  const usage = result.usage ?? { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
  return {
    id: idn.id,
    object: 'chat.completion',
    created: idn.created,
    model: idn.model,
    choices: result.choices.map((c) => {
      const message: Record<string, unknown> = { role: 'assistant', content: c.message.content };
      if (c.message.tool_calls?.length) message.tool_calls = c.message.tool_calls;
      if (c.message.reasoning_content) message.reasoning_content = c.message.reasoning_content;
      return { index: c.index, message, finish_reason: c.finish_reason };
    }),
    usage: usageBody(usage, result.timing),
  };
}

/** One `chat.completion.chunk` for a normalised stream event (null for events that are not chunks). */
export function chunkBody(idn: ChatIdentity, e: StreamEvent, first: boolean): Record<string, unknown> | null {
  const base = { id: idn.id, object: 'chat.completion.chunk', created: idn.created, model: idn.model };
  if (e.type === 'usage') return null;
  if (e.type === 'finish') return { ...base, choices: [{ index: e.index, delta: {}, finish_reason: e.finish_reason }] };
  const delta: Record<string, unknown> = {};
  if (first) delta.role = 'assistant';
  if (e.content !== undefined) delta.content = e.content;
  if (e.reasoning !== undefined) delta.reasoning_content = e.reasoning;
  if (e.tool_calls?.length) delta.tool_calls = e.tool_calls;
  return { ...base, choices: [{ index: e.index, delta, finish_reason: null }] };
}

export function usageChunkBody(idn: ChatIdentity, usage: Usage, timing?: UpstreamTiming): Record<string, unknown> {
  return { id: idn.id, object: 'chat.completion.chunk', created: idn.created, model: idn.model, choices: [], usage: usageBody(usage, timing) };
}

/** Header values from usage (docs/api.md "POST /v1/chat/completions"). */
export function usageHeaders(usage?: Usage, timing?: UpstreamTiming): Record<string, string> {
  const h: Record<string, string> = {};
  const values = [usage?.reasoning_tokens, timing?.queue_time, timing?.prompt_time, timing?.completion_time];
  TRAILER_NAMES.forEach((name, i) => {
    if (values[i] !== undefined) h[name] = String(values[i]);
  });
  return h;
}

/** The usage-derived headers, in usageHeaders' order; streams send them as trailers. */
export const TRAILER_NAMES = ['Gateway-Reasoning-Tokens', 'Gateway-Queue-Time', 'Gateway-Prompt-Time', 'Gateway-Completion-Time'] as const;
