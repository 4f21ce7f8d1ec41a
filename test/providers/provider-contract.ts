import type { ChatRequest, ProviderAdapter, StreamEvent, UpstreamTarget } from '../../src/providers/provider-adapter';
import { ERROR_BODY_MAX_BYTES, ERROR_BODY_MAX_MS } from '../../src/providers/http/upstream-call';
import { UpstreamError } from '../../src/providers/upstream-error';
import { DEFAULT_TEXT, FakeUpstream, LARGE_ERROR_BODY_BYTES } from '../fakes/fake-upstream';
import { makeTarget, rejectedWith, TIMEOUTS } from '../support/kit';

export interface ContractSetup {
  adapter: ProviderAdapter;
  fake: FakeUpstream;
  /** A target pointing at the fake (provider with base_url = fake.url). */
  target: (overrides?: Partial<UpstreamTarget>) => UpstreamTarget;
  /** Whether the family reports reasoning tokens (declared, never silently skipped). */
  reportsReasoningTokens: boolean;
}

/** Targets for the contract specs: the kit's, so unit specs build the same ones. */
export { makeTarget, TIMEOUTS };

const REQ: ChatRequest = { messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Say hello.' }], max_completion_tokens: 64 };

async function collect(events: AsyncIterable<StreamEvent>) {
  let text = '';
  let reasoning = '';
  const finishes: string[] = [];
  const usages: StreamEvent[] = [];
  for await (const e of events) {
    if (e.type === 'delta') {
      text += e.content ?? '';
      reasoning += e.reasoning ?? '';
    } else if (e.type === 'finish') finishes.push(e.finish_reason);
    else usages.push(e);
  }
  return { text, reasoning, finishes, usages };
}

/** The UpstreamError a call rejects with (the spec fails on anything else). */
export const upstreamError = (p: Promise<unknown>): Promise<UpstreamError> => rejectedWith(p, UpstreamError);

/** Every event of a stream, in order. */
export async function eventsOf(events: AsyncIterable<StreamEvent>): Promise<StreamEvent[]> {
  const all: StreamEvent[] = [];
  for await (const e of events) all.push(e);
  return all;
}

const ctx = (target: UpstreamTarget, signal = new AbortController().signal) => ({ target, signal, requestId: 'req-contract' });

/**
 * The provider contract: every family passes the same behaviours against its fake
 * speaking the real wire format. Family-specific request mapping lives in each family's own spec.
 */
export function providerContract(name: string, setup: () => Promise<ContractSetup>): void {
  describe(`provider contract: ${name}`, () => {
    let s: ContractSetup;
    beforeAll(async () => {
      s = await setup();
    });
    afterEach(() => s.fake.reset());
    afterAll(() => s.fake.stop());

    it('non-streaming: content, finish reason and usage', async () => {
      s.fake.next({ text: 'Hi there, wörld ✓', usage: { prompt: 11, completion: 7 } });
      const r = await s.adapter.chat(REQ, ctx(s.target()));
      expect(r.choices[0]).toMatchObject({ index: 0, message: { role: 'assistant', content: 'Hi there, wörld ✓' }, finish_reason: 'stop' });
      expect(r.usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 });
      expect(s.fake.requests).toHaveLength(1);
    });

    it('non-streaming: length finish and a tool call', async () => {
      s.fake.next({ text: 'cut', finish: 'length' });
      expect((await s.adapter.chat(REQ, ctx(s.target()))).choices[0].finish_reason).toBe('length');
      s.fake.next({ toolCall: { id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' }, finish: 'tool_calls' });
      const r = await s.adapter.chat(REQ, ctx(s.target()));
      expect(r.choices[0].finish_reason).toBe('tool_calls');
      expect(r.choices[0].message.tool_calls?.[0]).toMatchObject({ type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } });
    });

    it.each([
      ['one event per write', {}],
      ['several events per write', { delivery: 'all-at-once' as const }],
      ['split at every 3 bytes (inside UTF-8 characters)', { delivery: 'byte-split' as const, splitEvery: 3 }],
      ['split at every byte', { delivery: 'byte-split' as const, splitEvery: 1 }],
      ['CRLF line ends', { lineEnding: 'crlf' as const }],
      ['CR line ends', { lineEnding: 'cr' as const }],
      ['data: without the space', { noSpaceAfterData: true }],
      ['heartbeat comments', { heartbeats: true }],
    ])('streaming: %s', async (_label, framing) => {
      const text = 'Grüße — 你好, wörld! ✓ done';
      s.fake.next({ text, usage: { prompt: 5, completion: 9 }, ...framing });
      const r = await collect(await s.adapter.chatStream(REQ, ctx(s.target())));
      expect(r.text).toBe(text);
      expect(r.finishes).toEqual(['stop']);
      expect(r.usages).toEqual([expect.objectContaining({ type: 'usage', usage: expect.objectContaining({ prompt_tokens: 5, completion_tokens: 9, total_tokens: 14 }) })]);
    });

    it('streaming: yields the first event before the upstream has finished (no buffering)', async () => {
      s.fake.next({ text: 'one two three four', chunkDelayMs: 150 });
      const started = Date.now();
      const it = (await s.adapter.chatStream(REQ, ctx(s.target())))[Symbol.asyncIterator]();
      let first = await it.next();
      while (!first.done && !(first.value.type === 'delta' && first.value.content)) first = await it.next();
      expect(Date.now() - started).toBeLessThan(450);
      while (!(await it.next()).done);
    });

    it('streaming: a tool call arrives as tool-call deltas', async () => {
      s.fake.next({ toolCall: { id: 'call_9', name: 'lookup', arguments: '{"q":"x"}' }, finish: 'tool_calls' });
      let args = '';
      let name = '';
      const finishes: string[] = [];
      for await (const e of await s.adapter.chatStream(REQ, ctx(s.target()))) {
        if (e.type === 'delta') for (const t of e.tool_calls ?? []) (name += t.function?.name ?? '', (args += t.function?.arguments ?? ''));
        if (e.type === 'finish') finishes.push(e.finish_reason);
      }
      expect([name, args, finishes]).toEqual(['lookup', '{"q":"x"}', ['tool_calls']]);
    });

    it('reasoning tokens are reported where the family reports them', async () => {
      s.fake.next({ text: 'ok', reasoning: 'thinking about it', usage: { prompt: 3, completion: 20, reasoning: 12 } });
      const r = await s.adapter.chat({ ...REQ, reasoning_effort: 'low' }, ctx(s.target()));
      if (s.reportsReasoningTokens) {
        expect(r.usage?.reasoning_tokens).toBe(12);
        expect(r.usage?.completion_tokens).toBeGreaterThanOrEqual(12);
      } else expect(r.usage?.reasoning_tokens).toBeUndefined();
    });

    it.each([429, 500, 503, 400, 401])('an error status %i before the stream is an UpstreamError with the status', async (status) => {
      s.fake.next({ errorStatus: status, retryAfter: status === 429 ? 2 : undefined });
      const err = await upstreamError(s.adapter.chatStream(REQ, ctx(s.target())));
      expect([err.kind, err.status]).toEqual(['status', status]);
      if (status === 429) expect(err.retryAfterMs).toBe(2000);
      s.fake.next({ errorStatus: status });
      expect((await upstreamError(s.adapter.chat(REQ, ctx(s.target())))).status).toBe(status);
    });

    // The status decides fallback and the client's error (docs/api.md "Fallback"): an error body that cannot be
    // read whole must not turn it into a network or protocol failure, nor leave a fragment in detail.
    it.each([503, 429, 400])('an error status %i whose body is cut mid-way keeps the status, and no fragment of the body', async (status) => {
      s.fake.next({ errorStatus: status, retryAfter: 2, errorBody: 'cut' });
      const err = await upstreamError(s.adapter.chat(REQ, ctx(s.target())));
      expect([err.kind, err.status, err.retryAfterMs, err.opts.code]).toEqual(['status', status, 2000, undefined]);
      expect(err.detail).not.toMatch(/[{}"]/);
      s.fake.next({ errorStatus: status, errorBody: 'cut' });
      expect(await upstreamError(s.adapter.chatStream(REQ, ctx(s.target())))).toMatchObject({ kind: 'status', status });
    });

    it('an error body over the size cap keeps the status', async () => {
      s.fake.next({ errorStatus: 500 });
      const err = await upstreamError(s.adapter.chat(REQ, ctx(s.target({ maxResponseBytes: 16 }))));
      expect([err.kind, err.status, err.opts.code]).toEqual(['status', 500, undefined]);
      s.fake.next({ errorStatus: 502 });
      expect(await upstreamError(s.adapter.chatStream(REQ, ctx(s.target({ maxResponseBytes: 16 }))))).toMatchObject({ kind: 'status', status: 502 });
    });

    it('a client abort while an error body is being read stays an abort', async () => {
      s.fake.next({ errorStatus: 503, errorBody: 'hang' });
      const ac = new AbortController();
      setTimeout(() => ac.abort(), 100);
      expect((await upstreamError(s.adapter.chat(REQ, ctx(s.target(), ac.signal)))).kind).toBe('aborted');
    });

    // A non-streaming body has only the total timer (600 s by default): the status must not wait on it.
    it.each(['hang', 'drip'] as const)('an error body that %ss after its first bytes gives the status error within ~2 s, not at the total timeout', async (errorBody) => {
      s.fake.next({ errorStatus: 503, retryAfter: 2, errorBody });
      const started = Date.now();
      const err = await upstreamError(s.adapter.chat(REQ, ctx(s.target({ timeouts: { ...TIMEOUTS, totalMs: 60_000 } }))));
      expect([err.kind, err.status, err.retryAfterMs]).toEqual(['status', 503, 2000]);
      expect(Date.now() - started).toBeLessThan(ERROR_BODY_MAX_MS + 1_000);
      await new Promise((r) => setTimeout(r, 100));
      expect(s.fake.clientAborts).toBe(1);
    });

    it('an error body of several MiB is not read past 64 KiB', async () => {
      s.fake.next({ errorStatus: 500, errorBody: 'large' });
      const started = Date.now();
      const err = await upstreamError(s.adapter.chat(REQ, ctx(s.target({ timeouts: { ...TIMEOUTS, totalMs: 60_000 }, maxResponseBytes: 2 * LARGE_ERROR_BODY_BYTES }))));
      expect([err.kind, err.status]).toEqual(['status', 500]);
      expect(Date.now() - started).toBeLessThan(1_000);
      await new Promise((r) => setTimeout(r, 100));
      // The fake writes 64 KiB every 5 ms until the client closes: a reader that stopped at the cap
      // closed after a few pieces, one that read on took all 8 MiB.
      expect(s.fake.clientAborts).toBe(1);
      expect(s.fake.errorBodyBytesSent).toBeGreaterThanOrEqual(ERROR_BODY_MAX_BYTES);
      expect(s.fake.errorBodyBytesSent).toBeLessThan(LARGE_ERROR_BODY_BYTES / 8);
    });

    it('an in-band error after the first content is thrown mid-stream', async () => {
      s.fake.next({ text: 'partial answer here', midStreamError: true });
      const it = (await s.adapter.chatStream(REQ, ctx(s.target())))[Symbol.asyncIterator]();
      let sawContent = false;
      const err = await upstreamError(
        (async () => {
          for (;;) {
            const r = await it.next();
            if (r.done) return;
            if (r.value.type === 'delta' && r.value.content) sawContent = true;
          }
        })(),
      );
      expect(sawContent).toBe(true);
      expect(['status', 'protocol']).toContain(err.kind);
    });

    it('a stream cut before its end marker is a protocol error, not a clean end', async () => {
      s.fake.next({ text: 'partial answer here', truncate: true });
      const err = await upstreamError(collect(await s.adapter.chatStream(REQ, ctx(s.target()))));
      expect(['protocol', 'network']).toContain(err.kind);
    });

    it('a stalled stream hits the idle timeout', async () => {
      s.fake.next({ text: 'partial answer here', stallMs: 1_500 });
      const err = await upstreamError(collect(await s.adapter.chatStream(REQ, ctx(s.target()))));
      expect([err.kind, err.opts.phase]).toEqual(['timeout', 'idle']);
    });

    it('a slow first byte hits the first-token timeout; a dead port is a network error', async () => {
      s.fake.next({ stallBeforeHeadersMs: 3_000 });
      const err = await upstreamError(s.adapter.chatStream(REQ, ctx(s.target())));
      expect([err.kind, err.opts.phase]).toEqual(['timeout', 'first_token']);
      const dead = s.target({ provider: { ...s.target().provider, base_url: 'http://127.0.0.1:9' } });
      expect((await upstreamError(s.adapter.chat(REQ, ctx(dead)))).kind).toBe('network');
    });

    it('aborting the signal aborts the upstream request at once', async () => {
      s.fake.next({ text: 'a b c d e f g h i j k l', chunkDelayMs: 200 });
      const ac = new AbortController();
      const events = await s.adapter.chatStream(REQ, ctx(s.target(), ac.signal));
      const it = events[Symbol.asyncIterator]();
      await it.next();
      ac.abort();
      const err = await upstreamError(
        (async () => {
          while (!(await it.next()).done);
        })(),
      );
      expect(err.kind).toBe('aborted');
      await new Promise((r) => setTimeout(r, 100));
      expect(s.fake.clientAborts).toBe(1);
    });

    it('caps the response size', async () => {
      s.fake.next({ text: 'x'.repeat(50_000) });
      const err = await upstreamError(s.adapter.chat(REQ, ctx(s.target({ maxResponseBytes: 10_000 }))));
      expect(err.kind).toBe('protocol');
    });

    it('sends the upstream model name, not the catalogue id, and never leaks DEFAULT_TEXT into requests', async () => {
      s.fake.next({});
      await s.adapter.chat(REQ, ctx(s.target()));
      const rec = s.fake.requests[0];
      expect(JSON.stringify(rec)).toContain('fake-model');
      expect(JSON.stringify(rec.body ?? {})).not.toContain('catalogue-model');
      expect(DEFAULT_TEXT).toBeTruthy();
    });
  });
}
