import type { ChatChoice, ChatResult, EmbeddingResult, FinishReason, StreamEvent, ToolCall, Usage } from '../provider-adapter';
import { UpstreamError } from '../upstream-error';
import { makeToolCallId } from './gemini-tool-call-id';
import type {
  GeminiBatchEmbedContentsResponse, GeminiCandidate, GeminiEmbedContentResponse, GeminiErrorBody, GeminiGenerateContentResponse, GeminiUsageMetadata,
} from './gemini.wire';

const CONTENT_FILTER = new Set([
  'SAFETY', 'RECITATION', 'BLOCKLIST', 'PROHIBITED_CONTENT', 'SPII', 'LANGUAGE', 'IMAGE_SAFETY', 'IMAGE_PROHIBITED_CONTENT', 'IMAGE_RECITATION',
]);

/**
 * Gemini `finishReason` → OpenAI: MAX_TOKENS → length; the safety family
 * (SAFETY, RECITATION, BLOCKLIST, PROHIBITED_CONTENT, SPII, LANGUAGE and the IMAGE_* ones) →
 * content_filter; everything else (STOP, OTHER, FINISH_REASON_UNSPECIFIED, MALFORMED_FUNCTION_CALL,
 * …) → stop. Gemini says STOP after a function call, so a candidate that called a tool finishes
 * `tool_calls` unless it was cut or filtered.
 */
export function mapFinishReason(reason: string | undefined, hasToolCalls: boolean): FinishReason {
  if (reason === 'MAX_TOKENS') return 'length';
  if (reason && CONTENT_FILTER.has(reason)) return 'content_filter';
  return hasToolCalls ? 'tool_calls' : 'stop';
}

/**
 * usageMetadata → Usage (LiteLLM's rule): thoughts are not in candidatesTokenCount, so they are
 * added to the completion count and reported as reasoning tokens; total = prompt + completion
 * (totalTokenCount also counts toolUsePromptTokenCount, which OpenAI's usage has no slot for).
 */
export function toUsage(u: GeminiUsageMetadata | undefined): Usage | undefined {
  if (!u) return undefined;
  const prompt = u.promptTokenCount ?? 0;
  const completion = (u.candidatesTokenCount ?? 0) + (u.thoughtsTokenCount ?? 0);
  const usage: Usage = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
  if (u.thoughtsTokenCount !== undefined) usage.reasoning_tokens = u.thoughtsTokenCount;
  return usage;
}

function toolCallOf(part: { functionCall?: { name: string; args?: Record<string, unknown> }; thoughtSignature?: string }): ToolCall {
  return {
    id: makeToolCallId(part.thoughtSignature),
    type: 'function',
    function: { name: part.functionCall!.name, arguments: JSON.stringify(part.functionCall!.args ?? {}) },
  };
}

function toChoice(c: GeminiCandidate, position: number): ChatChoice {
  let content = '';
  let reasoning = '';
  const toolCalls: ToolCall[] = [];
  for (const p of c.content?.parts ?? []) {
    if (p.functionCall) toolCalls.push(toolCallOf(p));
    else if (typeof p.text === 'string') {
      if (p.thought) reasoning += p.text;
      else content += p.text;
    }
  }
  const message: ChatChoice['message'] = { role: 'assistant', content: content === '' && toolCalls.length ? null : content };
  if (toolCalls.length) message.tool_calls = toolCalls;
  if (reasoning) message.reasoning_content = reasoning;
  return { index: c.index ?? position, message, finish_reason: mapFinishReason(c.finishReason, toolCalls.length > 0) };
}

/** An `{error}` object in a 200 body or mid-stream → UpstreamError, status taken from the error's code. */
function inBandError(e: GeminiErrorBody): UpstreamError {
  return new UpstreamError('status', `gemini error ${e.code ?? '?'} ${e.status ?? ''}: ${e.message ?? ''}`.trim(), {
    status: typeof e.code === 'number' && e.code >= 400 ? e.code : 500,
    code: e.status,
  });
}

/**
 * A whole generateContent response → ChatResult. A blocked prompt (`promptFeedback.blockReason`, no
 * candidates) is answered, not thrown: one choice with empty content and `content_filter`, as
 * OpenAI does for a filtered prompt, so the routing layer does not fall back to another provider for
 * a prompt that was refused on its content. No candidates and no block reason is a protocol error.
 */
export function fromGenerateContentResponse(r: GeminiGenerateContentResponse): ChatResult {
  if (r.error) throw inBandError(r.error);
  const candidates = r.candidates ?? [];
  const usage = toUsage(r.usageMetadata);
  if (candidates.length === 0) {
    if (!r.promptFeedback?.blockReason) throw new UpstreamError('protocol', 'gemini response without candidates');
    return { choices: [{ index: 0, message: { role: 'assistant', content: '' }, finish_reason: 'content_filter' }], ...(usage ? { usage } : {}) };
  }
  return { choices: candidates.map(toChoice), ...(usage ? { usage } : {}) };
}

/** "31s" / "1.5s" (google.protobuf.Duration JSON) → ms. */
function durationMs(d: string | undefined): number | undefined {
  const m = d ? /^(\d+(?:\.\d+)?)s$/.exec(d) : null;
  return m ? Math.round(Number(m[1]) * 1000) : undefined;
}

/**
 * A non-200 answer → UpstreamError('status'). The body is `{error:{code,message,status}}`, or
 * the array form `[{error:…}]`. A bad API key is a 400 with reason API_KEY_INVALID at Google: it is
 * reported as 401 so the routing layer treats it as a misconfigured provider (docs/api.md "Fallback":
 * upstream 401/403 fall back). `retry-after` comes from the header, else from `google.rpc.RetryInfo.retryDelay`.
 * The provider's message goes into `detail` only.
 */
export function toStatusError(status: number, bodyText: string, headerRetryAfterMs: number | undefined): UpstreamError {
  let e: GeminiErrorBody | undefined;
  try {
    const parsed: unknown = JSON.parse(bodyText);
    const obj = (Array.isArray(parsed) ? parsed[0] : parsed) as { error?: GeminiErrorBody } | undefined;
    if (obj && typeof obj === 'object' && obj.error && typeof obj.error === 'object') e = obj.error;
  } catch {
    // not JSON (a proxy's HTML page, say): the raw text goes into detail
  }
  const reasons = (e?.details ?? []).map((d) => d.reason).filter(Boolean);
  const retryInfo = durationMs(e?.details?.find((d) => d['@type']?.endsWith('google.rpc.RetryInfo'))?.retryDelay);
  const effective = status === 400 && reasons.includes('API_KEY_INVALID') ? 401 : status;
  const detail = e
    ? `gemini ${status} ${e.status ?? ''}${reasons.length ? ` (${reasons.join(', ')})` : ''}: ${e.message ?? ''}`
    : `gemini ${status}: ${bodyText.slice(0, 500)}`;
  return new UpstreamError('status', detail, { status: effective, retryAfterMs: headerRetryAfterMs ?? retryInfo, code: e?.status });
}

/**
 * Turns the events of a `streamGenerateContent?alt=sse` stream (each a full response fragment
 * holding only the new parts) into StreamEvents. Text → content deltas, thought parts →
 * reasoning deltas, each functionCall part → one tool-call delta with the whole arguments (Gemini
 * never splits them). A candidate's finish is emitted when its finishReason arrives; usage, from the
 * last fragment that carried usageMetadata, once the body has ended (`end()`), which also rejects a
 * stream that ended before every candidate finished.
 */
export class GeminiStreamMapper {
  private readonly toolCounts = new Map<number, number>();
  private readonly finished = new Set<number>();
  private readonly seen = new Set<number>();
  private usage?: GeminiUsageMetadata;

  push(r: GeminiGenerateContentResponse): StreamEvent[] {
    if (r.error) throw inBandError(r.error);
    if (r.usageMetadata) this.usage = r.usageMetadata;
    const out: StreamEvent[] = [];
    const candidates = r.candidates ?? [];
    if (candidates.length === 0 && r.promptFeedback?.blockReason && !this.finished.has(0)) {
      this.seen.add(0);
      this.finished.add(0);
      out.push({ type: 'finish', index: 0, finish_reason: 'content_filter' });
    }
    candidates.forEach((c, position) => {
      const index = c.index ?? position;
      this.seen.add(index);
      for (const p of c.content?.parts ?? []) {
        if (p.functionCall) {
          const n = this.toolCounts.get(index) ?? 0;
          this.toolCounts.set(index, n + 1);
          const tc = toolCallOf(p);
          out.push({ type: 'delta', index, tool_calls: [{ index: n, id: tc.id, type: 'function', function: tc.function }] });
        } else if (typeof p.text === 'string' && p.text !== '') {
          out.push(p.thought ? { type: 'delta', index, reasoning: p.text } : { type: 'delta', index, content: p.text });
        }
      }
      if (c.finishReason && !this.finished.has(index)) {
        this.finished.add(index);
        out.push({ type: 'finish', index, finish_reason: mapFinishReason(c.finishReason, (this.toolCounts.get(index) ?? 0) > 0) });
      }
    });
    return out;
  }

  end(): StreamEvent[] {
    const open = [...this.seen].filter((i) => !this.finished.has(i));
    if (this.finished.size === 0 || open.length) {
      throw new UpstreamError('protocol', `gemini stream ended before a finishReason${open.length ? ` (candidates ${open.join(', ')})` : ''}`);
    }
    const usage = toUsage(this.usage);
    return usage ? [{ type: 'usage', usage }] : [];
  }
}

/** Parses one JSON payload of the upstream, or throws a protocol error. */
export function parseJson<T>(text: string, what: string): T {
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new UpstreamError('protocol', `gemini ${what} is not JSON: ${text.slice(0, 200)}`);
  }
}

/**
 * Google's truncated vectors (`outputDimensionality` below the model's full size) are not unit
 * length; OpenAI's are, and clients compare with a dot product, so they are renormalised.
 */
function normalise(v: number[]): number[] {
  const norm = Math.hypot(...v);
  return norm > 0 ? v.map((x) => x / norm) : v;
}

/** Gemini reports no token counts for embeddings: about four characters per token is the estimate. */
export function estimateTokens(input: string[]): number {
  return input.reduce((n, t) => n + Math.max(1, Math.ceil(t.length / 4)), 0);
}

export function fromEmbedResponses(
  input: string[],
  r: GeminiEmbedContentResponse | GeminiBatchEmbedContentsResponse | { error?: GeminiErrorBody },
  renormalise: boolean,
): EmbeddingResult {
  if ('error' in r && r.error) throw inBandError(r.error);
  const vectors = 'embeddings' in r ? (r.embeddings ?? []).map((e) => e?.values) : [(r as GeminiEmbedContentResponse).embedding?.values];
  if (vectors.length !== input.length || vectors.some((v) => !Array.isArray(v))) {
    throw new UpstreamError('protocol', `gemini returned ${vectors.length} embeddings for ${input.length} inputs`);
  }
  const tokens = estimateTokens(input);
  return {
    embeddings: (vectors as number[][]).map((v) => (renormalise ? normalise(v) : v)),
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  };
}
