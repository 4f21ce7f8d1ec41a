import { minimalInstance } from '../json-schema/json-schema';
import type {
  AdapterCapabilities, CallContext, ChatMessage, ChatRequest, ChatResult, EmbeddingRequest, EmbeddingResult, ProviderAdapter, StreamEvent, ToolCall,
  UpstreamTarget,
} from '../provider-adapter';
import { UpstreamError } from '../upstream-error';

/**
 * The offline, deterministic `mock` family: answers from the upstream model name, which
 * may carry `+`-separated directives so demos and tests can trigger every path:
 *   `slow-<ms>`      delay between stream chunks (and before a JSON answer)
 *   `error-<status>` fail before answering with that upstream status (e.g. error-503, error-429)
 *   `fail-after-<n>` fail mid-stream after n content chunks
 *   `stall`          stop sending after the first chunk (the idle timeout fires)
 *   `length`         finish with `length`
 *   `reasoning`      report reasoning tokens
 * e.g. `upstream: "mock-fast+slow-50"`. Text and token counts depend only on the request.
 *
 * What it answers, so agent loops, structured outputs and reasoning can be tried without a key:
 * - `tools` given (and `tool_choice` not `none`) and the conversation ends in a user turn: a call
 *   of the tool `tool_choice` names, else the first, with arguments valid against its parameters
 *   (a minimal instance: required properties, first enum values, `$defs` followed);
 * - `response_format: json_schema`: content that validates against the schema (same generator);
 *   `json_object`: a JSON object `{"answer": …}`;
 * - the conversation ends in tool results: a text answer quoting them, so a loop ends;
 * - `reasoning_effort` other than `none` on a model whose config enables reasoning: reasoning text
 *   (`reasoning_content`, streamed as reasoning deltas) before the answer.
 */
interface Script {
  delayMs: number;
  errorStatus?: number;
  failAfter?: number;
  stall: boolean;
  finish: 'stop' | 'length';
  reasoning: boolean;
}

function scriptOf(upstream: string): Script {
  const s: Script = { delayMs: 0, stall: false, finish: 'stop', reasoning: false };
  for (const d of upstream.split('+').slice(1)) {
    const [name, arg] = [d.replace(/-\d+$/, ''), Number(d.match(/-(\d+)$/)?.[1])];
    if (name === 'slow') s.delayMs = arg;
    else if (name === 'error') s.errorStatus = arg;
    else if (name === 'fail-after') s.failAfter = arg;
    else if (name === 'stall') s.stall = true;
    else if (name === 'length') s.finish = 'length';
    else if (name === 'reasoning') s.reasoning = true;
  }
  return s;
}

const tokens = (text: string) => Math.max(1, Math.ceil(text.length / 4));

function lastUserText(req: ChatRequest): string {
  const m = [...req.messages].reverse().find((x) => x.role === 'user');
  if (!m || m.content === null) return '';
  return typeof m.content === 'string' ? m.content : m.content.map((p) => (p.type === 'text' ? p.text : '')).join(' ');
}

function answer(req: ChatRequest, target: UpstreamTarget): string {
  const words = lastUserText(req).split(/\s+/).filter(Boolean).length;
  return `This is a mock answer from ${target.upstream.split('+')[0]} to a message of ${words} words.`;
}

const textOf = (m: ChatMessage) =>
  m.content === null ? '' : typeof m.content === 'string' ? m.content : m.content.map((p) => (p.type === 'text' ? p.text : '')).join(' ');

/** The tool results the conversation ends in (after its last assistant turn), if it ends in any. */
function trailingToolResults(req: ChatRequest): ChatMessage[] {
  const out: ChatMessage[] = [];
  for (let i = req.messages.length - 1; i >= 0 && req.messages[i].role === 'tool'; i--) out.unshift(req.messages[i]);
  return out;
}

/** The conversation's last turn (system and developer messages aside) is the user's. */
function endsWithUser(req: ChatRequest): boolean {
  const turns = req.messages.filter((m) => m.role !== 'system' && m.role !== 'developer');
  return turns[turns.length - 1]?.role === 'user';
}

/** A text answer that uses the tool results, so a client's agent loop has its final answer. */
function toolAnswer(req: ChatRequest, results: ChatMessage[]): string {
  const names = new Map<string, string>();
  for (const m of req.messages) for (const c of m.tool_calls ?? []) names.set(c.id, c.function.name);
  const quoted = results.map((r) => {
    const text = textOf(r);
    return `${names.get(r.tool_call_id ?? '') ?? 'the tool'} returned ${text.length > 200 ? `${text.slice(0, 200)}…` : text}`;
  });
  return `Mock answer from the tool results: ${quoted.join('; ')}.`;
}

/** The call the mock makes when tools are offered, or undefined when it answers in text. */
function toolCallFor(req: ChatRequest): ToolCall | undefined {
  if (!req.tools?.length || req.tool_choice === 'none' || !endsWithUser(req)) return undefined;
  const named = typeof req.tool_choice === 'object' ? req.tool_choice.function.name : undefined;
  const tool = req.tools.find((t) => t.function.name === named) ?? req.tools[0];
  const args = minimalInstance(tool.function.parameters ?? { type: 'object' });
  const turn = req.messages.filter((m) => m.role === 'assistant').length;
  return { id: `call_mock_${turn}_0`, type: 'function', function: { name: tool.function.name, arguments: JSON.stringify(args ?? {}) } };
}

/** What the mock answers to one request: a tool call or content (text or JSON), and reasoning text when asked. */
interface Reply {
  content: string | null;
  toolCall?: ToolCall;
  reasoning?: string;
}

function replyFor(req: ChatRequest, target: UpstreamTarget): Reply {
  const effort = req.reasoning_effort;
  const reasoning =
    effort !== undefined && effort !== 'none' && target.model.reasoning.mode !== 'none'
      ? `Mock reasoning at ${effort} effort: the last message has ${lastUserText(req).split(/\s+/).filter(Boolean).length} words.`
      : undefined;
  const toolCall = toolCallFor(req);
  if (toolCall) return { content: null, toolCall, reasoning };
  const results = trailingToolResults(req);
  const text = results.length ? toolAnswer(req, results) : answer(req, target);
  const rf = req.response_format;
  if (rf?.type === 'json_schema') return { content: JSON.stringify(minimalInstance(rf.json_schema.schema)), reasoning };
  if (rf?.type === 'json_object') return { content: JSON.stringify({ answer: text }), reasoning };
  return { content: text, reasoning };
}

function usageOf(req: ChatRequest, reply: Reply, s: Script) {
  const prompt = req.messages.reduce((n, m) => n + tokens(typeof m.content === 'string' ? m.content : JSON.stringify(m.content ?? '')), 0);
  const reasoning = s.reasoning ? 16 : reply.reasoning ? tokens(reply.reasoning) : undefined;
  const completion = tokens(reply.content ?? reply.toolCall?.function.arguments ?? '') + (reasoning ?? 0);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion, ...(reasoning ? { reasoning_tokens: reasoning } : {}) };
}

/** A reply as stream events, in order: reasoning words, then content words or the tool call (name, then argument fragments). */
function streamEventsOf(reply: Reply): StreamEvent[] {
  const words = (t: string) => t.match(/\S+\s*/g) ?? [t];
  const out: StreamEvent[] = [];
  for (const w of reply.reasoning ? words(reply.reasoning) : []) out.push({ type: 'delta', index: 0, reasoning: w });
  const call = reply.toolCall;
  if (call) {
    out.push({ type: 'delta', index: 0, tool_calls: [{ index: 0, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } }] });
    const args = call.function.arguments;
    const n = Math.max(1, Math.ceil(args.length / 3));
    for (let i = 0; i < args.length; i += n) out.push({ type: 'delta', index: 0, tool_calls: [{ index: 0, function: { arguments: args.slice(i, i + n) } }] });
  } else {
    for (const w of words(reply.content ?? '')) out.push({ type: 'delta', index: 0, content: w });
  }
  return out;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(new UpstreamError('aborted', 'client went away'));
    const t = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(new UpstreamError('aborted', 'client went away'));
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

export class MockAdapter implements ProviderAdapter {
  capabilities(): AdapterCapabilities {
    return { embeddings: true, tools: true, multipleChoices: false, seed: true, images: false, jsonMode: true, jsonSchema: true, recursiveSchemas: true };
  }

  async chat(req: ChatRequest, ctx: CallContext): Promise<ChatResult> {
    const s = scriptOf(ctx.target.upstream);
    await this.before(s, ctx);
    const reply = replyFor(req, ctx.target);
    const message: ChatResult['choices'][number]['message'] = { role: 'assistant', content: reply.content };
    if (reply.toolCall) message.tool_calls = [reply.toolCall];
    if (reply.reasoning) message.reasoning_content = reply.reasoning;
    return {
      choices: [{ index: 0, message, finish_reason: reply.toolCall ? 'tool_calls' : s.finish }],
      usage: usageOf(req, reply, s),
    };
  }

  async chatStream(req: ChatRequest, ctx: CallContext): Promise<AsyncIterable<StreamEvent>> {
    const s = scriptOf(ctx.target.upstream);
    await this.before(s, ctx);
    const reply = replyFor(req, ctx.target);
    const parts = streamEventsOf(reply);
    const { signal } = ctx;
    const idleMs = ctx.target.timeouts.idleMs;
    return (async function* () {
      for (let i = 0; i < parts.length; i++) {
        if (i > 0 && s.delayMs) await sleep(s.delayMs, signal);
        if (s.failAfter !== undefined && i === s.failAfter) throw new UpstreamError('status', 'mock mid-stream failure', { status: 500 });
        if (s.stall && i === 1) {
          await sleep(idleMs, signal);
          throw new UpstreamError('timeout', `no idle within ${idleMs} ms`, { phase: 'idle' });
        }
        if (signal.aborted) throw new UpstreamError('aborted', 'client went away');
        yield parts[i];
      }
      yield { type: 'finish', index: 0, finish_reason: reply.toolCall ? 'tool_calls' : s.finish } as StreamEvent;
      yield { type: 'usage', usage: usageOf(req, reply, s) } as StreamEvent;
    })();
  }

  /**
   * Deterministic unit vectors derived from the text, so equal inputs embed equally. The text is
   * hashed once and each dimension mixed from that hash: linear in text length plus dimensions, so a
   * 1 MiB input at 16,384 dimensions (what the request caps allow) does not hold the event loop.
   */
  async embed(req: EmbeddingRequest, ctx: CallContext): Promise<EmbeddingResult> {
    const s = scriptOf(ctx.target.upstream);
    await this.before(s, ctx);
    const dims = req.dimensions ?? ctx.target.model.dimensions ?? 256;
    const embeddings = req.input.map((text) => {
      let h = 2166136261;
      for (let j = 0; j < text.length; j++) h = Math.imul(h ^ text.charCodeAt(j), 16777619);
      let sumSq = 0;
      const v = Array.from({ length: dims }, (_, i) => {
        // murmur3's finaliser over (hash, dimension): well spread, cheap.
        let x = (h ^ Math.imul(i + 1, 0x9e3779b9)) >>> 0;
        x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
        x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
        x ^= x >>> 16;
        const y = ((x >>> 0) / 2 ** 32) * 2 - 1;
        sumSq += y * y;
        return y;
      });
      const norm = Math.sqrt(sumSq) || 1;
      return v.map((x) => Math.fround(x / norm));
    });
    const total = req.input.reduce((n, t) => n + tokens(t), 0);
    return { embeddings, usage: { prompt_tokens: total, total_tokens: total } };
  }

  private async before(s: Script, ctx: CallContext): Promise<void> {
    if (s.delayMs) await sleep(s.delayMs, ctx.signal);
    if (s.errorStatus) throw new UpstreamError('status', `mock error ${s.errorStatus}`, { status: s.errorStatus, retryAfterMs: s.errorStatus === 429 ? 1000 : undefined });
  }
}

export const createMockAdapter = (): ProviderAdapter => new MockAdapter();
