import type {
  AdapterCapabilities, CallContext, ChatRequest, ChatResult, EmbeddingRequest, EmbeddingResult, ProviderAdapter, StreamEvent, UpstreamTarget,
} from '../provider-adapter';
import { UpstreamError } from '../upstream-error';

/**
 * The offline, deterministic `mock` family (issue 4): answers from the upstream model name, which
 * may carry `+`-separated directives so demos and tests can trigger every path:
 *   `slow-<ms>`      delay between stream chunks (and before a JSON answer)
 *   `error-<status>` fail before answering with that upstream status (e.g. error-503, error-429)
 *   `fail-after-<n>` fail mid-stream after n content chunks
 *   `stall`          stop sending after the first chunk (the idle timeout fires)
 *   `length`         finish with `length`
 *   `reasoning`      report reasoning tokens
 * e.g. `upstream: "mock-fast+slow-50"`. Text and token counts depend only on the request.
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

function usageOf(req: ChatRequest, text: string, s: Script) {
  const prompt = req.messages.reduce((n, m) => n + tokens(typeof m.content === 'string' ? m.content : JSON.stringify(m.content ?? '')), 0);
  const reasoning = s.reasoning ? 16 : undefined;
  const completion = tokens(text) + (reasoning ?? 0);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion, ...(reasoning ? { reasoning_tokens: reasoning } : {}) };
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
    return { embeddings: true, tools: false, multipleChoices: false, seed: true, images: false, jsonMode: true };
  }

  async chat(req: ChatRequest, ctx: CallContext): Promise<ChatResult> {
    const s = scriptOf(ctx.target.upstream);
    await this.before(s, ctx);
    const text = answer(req, ctx.target);
    return {
      choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: s.finish }],
      usage: usageOf(req, text, s),
    };
  }

  async chatStream(req: ChatRequest, ctx: CallContext): Promise<AsyncIterable<StreamEvent>> {
    const s = scriptOf(ctx.target.upstream);
    await this.before(s, ctx);
    const text = answer(req, ctx.target);
    const parts = text.match(/\S+\s*/g) ?? [text];
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
        yield { type: 'delta', index: 0, content: parts[i] } as StreamEvent;
      }
      yield { type: 'finish', index: 0, finish_reason: s.finish } as StreamEvent;
      yield { type: 'usage', usage: usageOf(req, text, s) } as StreamEvent;
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
