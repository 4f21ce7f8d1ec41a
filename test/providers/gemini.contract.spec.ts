import { Secret } from '../../src/config/secret';
import { createGeminiAdapter } from '../../src/providers/gemini/gemini.adapter';
import { estimateTokens } from '../../src/providers/gemini/gemini-response.mapper';
import { UpstreamHttp } from '../../src/providers/http/upstream-http';
import type { CallContext, ChatRequest, ProviderAdapter, UpstreamTarget } from '../../src/providers/provider-adapter';
import { FAKE_MAX_EMBED_BATCH, FAKE_THOUGHT_SIGNATURE, fakeEmbedding, GeminiFake, GeminiScenario } from '../fakes/gemini-fake';
import { eventsOf, makeTarget, providerContract, TIMEOUTS, upstreamError } from './provider-contract';

const KEY = 'gemini-test-key-123';
const http = new UpstreamHttp();
afterAll(() => http.destroy());

const targetFor = (fake: GeminiFake, overrides: Partial<UpstreamTarget> = {}, model: Partial<UpstreamTarget['model']> = {}): UpstreamTarget => ({
  ...makeTarget({ family: 'gemini', id: 'gemini-test', base_url: fake.url, api_key: new Secret(KEY) }, 'fake-model', model),
  ...overrides,
});

providerContract('gemini', async () => {
  const fake = await new GeminiFake().start();
  return { adapter: createGeminiAdapter(http), fake, target: (o) => targetFor(fake, o), reportsReasoningTokens: true };
});

const REQ: ChatRequest = { messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Say hello.' }] };

describe('gemini adapter against the fake (wire details)', () => {
  let fake: GeminiFake;
  let adapter: ProviderAdapter;
  const ctx = (target = targetFor(fake)): CallContext => ({ target, signal: new AbortController().signal, requestId: 'req-gemini' });
  const next = (s: GeminiScenario) => fake.next(s);

  beforeAll(async () => {
    fake = await new GeminiFake().start();
    adapter = createGeminiAdapter(http);
  });
  afterEach(() => fake.reset());
  afterAll(() => fake.stop());

  it('calls :generateContent and :streamGenerateContent?alt=sse with the key in x-goog-api-key, never in the URL', async () => {
    next({});
    await adapter.chat(REQ, ctx());
    next({});
    await eventsOf(await adapter.chatStream(REQ, ctx()));
    const [json, sse] = fake.requests;
    expect([json.method, json.path]).toEqual(['POST', '/models/fake-model:generateContent']);
    expect([sse.method, sse.path]).toEqual(['POST', '/models/fake-model:streamGenerateContent?alt=sse']);
    for (const r of fake.requests) {
      expect(r.headers['x-goog-api-key']).toBe(KEY);
      expect(r.path).not.toContain(KEY);
      expect(r.headers.authorization).toBeUndefined();
    }
  });

  it('sends systemInstruction and user/model contents, and maps generationConfig', async () => {
    next({});
    await adapter.chat(
      {
        messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello' }, { role: 'user', content: 'Again' }],
        temperature: 0.3, max_completion_tokens: 99, stop: ['END'], response_format: { type: 'json_object' },
      },
      ctx(),
    );
    expect(fake.requests[0].body).toEqual({
      systemInstruction: { parts: [{ text: 'Be brief.' }] },
      contents: [
        { role: 'user', parts: [{ text: 'Hi' }] },
        { role: 'model', parts: [{ text: 'Hello' }] },
        { role: 'user', parts: [{ text: 'Again' }] },
      ],
      generationConfig: { temperature: 0.3, maxOutputTokens: 99, stopSequences: ['END'], responseMimeType: 'application/json' },
    });
  });

  it('a STOP with a functionCall is a tool_calls finish; the thought signature round-trips through the id', async () => {
    next({ toolCall: { name: 'get_weather', arguments: '{"city":"Paris"}' }, finish: 'tool_calls' });
    const r = await adapter.chat({ ...REQ, tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }] }, ctx());
    const call = r.choices[0].message.tool_calls![0];
    expect(r.choices[0]).toMatchObject({ finish_reason: 'tool_calls', message: { content: null } });
    expect(call.id).toMatch(/^call_[0-9a-f]{24}__ts_[A-Za-z0-9_-]+$/);

    next({ text: 'It is 21°C.' });
    await adapter.chat(
      {
        messages: [
          { role: 'user', content: 'Weather in Paris?' },
          { role: 'assistant', content: null, tool_calls: [call] },
          { role: 'tool', tool_call_id: call.id, content: '{"temp_c":21}' },
        ],
      },
      ctx(),
    );
    expect(fake.requests[1].body.contents).toEqual([
      { role: 'user', parts: [{ text: 'Weather in Paris?' }] },
      { role: 'model', parts: [{ functionCall: { name: 'get_weather', args: { city: 'Paris' } }, thoughtSignature: FAKE_THOUGHT_SIGNATURE }] },
      { role: 'user', parts: [{ functionResponse: { name: 'get_weather', response: { temp_c: 21 } } }] },
    ]);
  });

  it('maps reasoning_effort by the model mode and streams thought parts as reasoning, never content', async () => {
    next({ text: 'ok', reasoning: 'Considering the request', usage: { prompt: 4, completion: 30, reasoning: 28 } });
    const budget = targetFor(fake, {}, { reasoning: { mode: 'budget', can_disable: true, budgets: { medium: 4000 } } });
    const events = await eventsOf(await adapter.chatStream({ ...REQ, reasoning_effort: 'medium' }, ctx(budget)));
    expect(fake.requests[0].body.generationConfig.thinkingConfig).toEqual({ thinkingBudget: 4000, includeThoughts: true });
    const text = (k: 'content' | 'reasoning') => events.map((e) => (e.type === 'delta' ? (e[k] ?? '') : '')).join('');
    expect([text('content'), text('reasoning')]).toEqual(['ok', 'Considering the request']);
    expect(events.at(-1)).toEqual({ type: 'usage', usage: { prompt_tokens: 4, completion_tokens: 30, total_tokens: 34, reasoning_tokens: 28 } });

    next({});
    const level = targetFor(fake, {}, { reasoning: { mode: 'level', can_disable: false, budgets: {} } });
    await adapter.chat({ ...REQ, reasoning_effort: 'none' }, ctx(level));
    expect(fake.requests[1].body.generationConfig).toEqual({ thinkingConfig: { thinkingLevel: 'low' } });
  });

  it('n candidates come back as n choices', async () => {
    next({ text: 'same' });
    const r = await adapter.chat({ ...REQ, n: 2 }, ctx());
    expect(fake.requests[0].body.generationConfig.candidateCount).toBe(2);
    expect(r.choices.map((c) => [c.index, c.message.content])).toEqual([[0, 'same'], [1, 'same']]);
    next({ text: 'a b' });
    const events = await eventsOf(await adapter.chatStream({ ...REQ, n: 2 }, ctx()));
    expect(events.filter((e) => e.type === 'finish')).toEqual([
      { type: 'finish', index: 0, finish_reason: 'stop' },
      { type: 'finish', index: 1, finish_reason: 'stop' },
    ]);
  });

  it('a blocked prompt is a content_filter finish with empty content, JSON and streaming', async () => {
    next({ blockReason: 'SAFETY', usage: { prompt: 9, completion: 0 } });
    const r = await adapter.chat(REQ, ctx());
    expect(r.choices).toEqual([{ index: 0, message: { role: 'assistant', content: '' }, finish_reason: 'content_filter' }]);
    expect(r.usage).toEqual({ prompt_tokens: 9, completion_tokens: 0, total_tokens: 9 });
    next({ blockReason: 'PROHIBITED_CONTENT' });
    const events = await eventsOf(await adapter.chatStream(REQ, ctx()));
    expect(events.filter((e) => e.type !== 'usage')).toEqual([{ type: 'finish', index: 0, finish_reason: 'content_filter' }]);
  });

  it('a SAFETY finish mid-answer is content_filter', async () => {
    next({ text: 'partial', finishReason: 'SAFETY' });
    expect((await adapter.chat(REQ, ctx())).choices[0].finish_reason).toBe('content_filter');
  });

  it('errors: array form, a bad key as 401, RetryInfo as retry-after', async () => {
    next({ errorStatus: 503, errorArray: true });
    const arr = await upstreamError(adapter.chat(REQ, ctx()));
    expect([arr.kind, arr.status, arr.opts.code]).toEqual(['status', 503, 'UNAVAILABLE']);
    expect(arr.message).not.toContain(KEY);

    next({ badApiKey: true });
    const bad = await upstreamError(adapter.chatStream(REQ, ctx()));
    expect([bad.status, bad.opts.code]).toEqual([401, 'INVALID_ARGUMENT']);
    expect(bad.detail).toContain('API_KEY_INVALID');

    next({ errorStatus: 429, retryDelaySeconds: 31 });
    const quota = await upstreamError(adapter.chat(REQ, ctx()));
    expect([quota.status, quota.retryAfterMs, quota.opts.code]).toEqual([429, 31_000, 'RESOURCE_EXHAUSTED']);
  });

  it('a stream that ends before any finishReason is a protocol error; the mid-stream error object carries its code', async () => {
    next({ text: 'only one', truncate: true });
    const cut = await upstreamError(eventsOf(await adapter.chatStream(REQ, ctx())));
    expect(cut.kind).toBe('protocol');
    next({ text: 'only one', midStreamError: true });
    const mid = await upstreamError(eventsOf(await adapter.chatStream(REQ, ctx())));
    expect([mid.kind, mid.status, mid.opts.code]).toEqual(['status', 500, 'INTERNAL']);
  });

  it('embeds one input with :embedContent and several with :batchEmbedContents, in input order, renormalised', async () => {
    const single = await adapter.embed!({ input: ['hello'], dimensions: 8 }, ctx());
    expect(fake.requests[0].path).toBe('/models/fake-model:embedContent');
    expect(fake.requests[0].body).toEqual({ content: { parts: [{ text: 'hello' }] }, outputDimensionality: 8 });
    expect(single.embeddings).toHaveLength(1);
    expect(single.embeddings[0]).toHaveLength(8);
    expect(Math.hypot(...single.embeddings[0])).toBeCloseTo(1, 6);

    const input = ['alpha', 'beta', 'gamma'];
    const batch = await adapter.embed!({ input, dimensions: 16 }, ctx());
    expect(fake.requests[1].path).toBe('/models/fake-model:batchEmbedContents');
    expect(fake.requests[1].body.requests.map((r: { model: string; outputDimensionality: number }) => [r.model, r.outputDimensionality])).toEqual(
      input.map(() => ['models/fake-model', 16]),
    );
    input.forEach((text, i) => {
      const raw = fakeEmbedding(text, 16);
      const norm = Math.hypot(...raw);
      expect(batch.embeddings[i].map((x) => Number(x.toFixed(9)))).toEqual(raw.map((x) => Number((x / norm).toFixed(9))));
    });
    expect(batch.usage.prompt_tokens).toBeGreaterThan(0);
    expect(batch.usage.total_tokens).toBe(batch.usage.prompt_tokens);
  });

  it('embeds with the model dimensions when the request gives none, and full vectors untouched otherwise', async () => {
    const withModelDims = await adapter.embed!({ input: ['x'] }, ctx(targetFor(fake, {}, { type: 'embedding', dimensions: 4 })));
    expect(fake.requests[0].body.outputDimensionality).toBe(4);
    expect(withModelDims.embeddings[0]).toHaveLength(4);
    const full = await adapter.embed!({ input: ['x'] }, ctx());
    expect(fake.requests[1].body.outputDimensionality).toBeUndefined();
    expect(full.embeddings[0]).toEqual(fakeEmbedding('x'));
  });

  it('an embedding error is an UpstreamError with the status', async () => {
    next({ errorStatus: 404 });
    const err = await upstreamError(adapter.embed!({ input: ['a', 'b'] }, ctx()));
    expect([err.status, err.opts.code]).toEqual([404, 'NOT_FOUND']);
  });

  describe('more than 100 inputs: consecutive batchEmbedContents calls of at most 100', () => {
    const INPUT = Array.from({ length: 250 }, (_, i) => `text number ${i}`);
    const sentTexts = (r: { body: { requests: { content: { parts: { text: string }[] } }[] } }) => r.body.requests.map((q) => q.content.parts[0].text);

    it('250 inputs → 100/100/50, joined back in input order, each vector its own input, usage summed', async () => {
      // 100 full 3072-dim vectors are ~6 MB of the fake's JSON, over the default 4 MiB response cap.
      const r = await adapter.embed!({ input: INPUT }, ctx(targetFor(fake, { maxResponseBytes: 64 * 2 ** 20 })));
      expect(fake.requests.map((q) => [q.path, q.body.requests.length])).toEqual([
        ['/models/fake-model:batchEmbedContents', 100],
        ['/models/fake-model:batchEmbedContents', 100],
        ['/models/fake-model:batchEmbedContents', 50],
      ]);
      expect(fake.requests.flatMap(sentTexts)).toEqual(INPUT);
      expect(r.embeddings).toHaveLength(250);
      r.embeddings.forEach((v, i) => expect(v).toEqual(fakeEmbedding(INPUT[i])));
      // Gemini reports no usage: the estimate of each batch, summed, is the estimate of the whole input.
      const tokens = estimateTokens(INPUT);
      expect(tokens).toBeGreaterThan(0);
      expect(r.usage).toEqual({ prompt_tokens: tokens, total_tokens: tokens });
    });

    it('renormalises truncated vectors per batch with the right input', async () => {
      const r = await adapter.embed!({ input: INPUT, dimensions: 8 }, ctx());
      expect(fake.requests.map((q) => q.body.requests[0].outputDimensionality)).toEqual([8, 8, 8]);
      for (const i of [0, 99, 100, 199, 200, 249]) {
        const raw = fakeEmbedding(INPUT[i], 8);
        const norm = Math.hypot(...raw);
        expect(r.embeddings[i].map((x) => Number(x.toFixed(9)))).toEqual(raw.map((x) => Number((x / norm).toFixed(9))));
      }
    });

    it('a failure in the 2nd batch fails the whole call with that error, and no 3rd batch is sent', async () => {
      fake.next({}, { errorStatus: 503 });
      const err = await upstreamError(adapter.embed!({ input: INPUT, dimensions: 8 }, ctx()));
      expect([err.kind, err.status, err.opts.code]).toEqual(['status', 503, 'UNAVAILABLE']);
      expect(fake.requests).toHaveLength(2);
    });

    it('an abort while the 2nd batch is in flight rejects as aborted and sends no further batch', async () => {
      fake.next({}, { stallBeforeHeadersMs: 300 });
      const controller = new AbortController();
      const call = upstreamError(adapter.embed!({ input: INPUT, dimensions: 8 }, { target: targetFor(fake), signal: controller.signal, requestId: 'req-gemini' }));
      for (let waited = 0; fake.requests.length < 2 && waited < 2_000; waited += 5) await new Promise((r) => setTimeout(r, 5));
      expect(fake.requests).toHaveLength(2);
      controller.abort();
      expect((await call).kind).toBe('aborted');
      await new Promise((r) => setTimeout(r, 400));
      expect(fake.requests).toHaveLength(2);
    });

    it('the whole call has one deadline, the total timeout: one slow batch fits, three do not', async () => {
      // Each batch answers after 600 ms and the total is 1 s: the first batch fits, the second is cut
      // when the deadline passes (not left to finish and checked after), and no third is sent. Under
      // a fresh total per batch all three would pass. One-character inputs keep the fake's embedding
      // maths (it shares the event loop) negligible.
      const input = Array.from({ length: 250 }, (_, i) => String.fromCharCode(97 + (i % 26)));
      const target = targetFor(fake, { timeouts: { ...TIMEOUTS, totalMs: 1_000 } });
      fake.always({ stallBeforeHeadersMs: 600 });
      expect((await adapter.embed!({ input: input.slice(0, 100), dimensions: 8 }, ctx(target))).embeddings).toHaveLength(100);

      fake.reset().always({ stallBeforeHeadersMs: 600 });
      const started = Date.now();
      const err = await upstreamError(adapter.embed!({ input, dimensions: 8 }, ctx(target)));
      const elapsed = Date.now() - started;
      expect([err.kind, err.opts.phase, err.detail]).toEqual(['timeout', 'total', 'no total within 1000 ms']);
      expect(elapsed).toBeGreaterThanOrEqual(950);
      expect(elapsed).toBeLessThan(1_250);
      expect(fake.requests).toHaveLength(2);
      await new Promise((r) => setTimeout(r, 100));
      expect(fake.clientAborts).toBe(1);
    });

    it('the fake itself: more than 100 requests in one batch is Google\'s 400 INVALID_ARGUMENT', async () => {
      const requests = Array.from({ length: FAKE_MAX_EMBED_BATCH + 1 }, () => ({ model: 'models/fake-model', content: { parts: [{ text: 'x' }] } }));
      const res = await fetch(`${fake.url}/models/fake-model:batchEmbedContents`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ requests }),
      });
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({
        error: { code: 400, message: '* BatchEmbedContentsRequest.requests: at most 100 requests can be in one batch\n', status: 'INVALID_ARGUMENT' },
      });
    });
  });

  it('a stream answered as one JSON array (alt=sse dropped on the way) is still read; a cut array is a protocol error', async () => {
    next({ text: 'one two', usage: { prompt: 2, completion: 2 }, jsonArrayStream: true });
    const events = await eventsOf(await adapter.chatStream(REQ, ctx()));
    expect(events).toEqual([
      { type: 'delta', index: 0, content: 'one ' },
      { type: 'delta', index: 0, content: 'two' },
      { type: 'finish', index: 0, finish_reason: 'stop' },
      { type: 'usage', usage: { prompt_tokens: 2, completion_tokens: 2, total_tokens: 4 } },
    ]);
    next({ text: 'one two', truncate: true, jsonArrayStream: true });
    expect((await upstreamError(eventsOf(await adapter.chatStream(REQ, ctx())))).kind).toBe('protocol');
  });

  it('the fake itself: without alt=sse it streams a JSON array, which the adapter would also read', async () => {
    next({ text: 'x y' });
    const res = await fetch(`${fake.url}/models/fake-model:streamGenerateContent`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
    });
    const body = (await res.json()) as { candidates: { content: { parts: { text: string }[] }; finishReason?: string }[] }[];
    expect(body.map((f) => f.candidates[0].content.parts[0].text)).toEqual(['x ', 'y']);
    expect(body.at(-1)!.candidates[0].finishReason).toBe('STOP');
  });

  it('the fake itself: SSE events end in CRLF CRLF by default and carry no [DONE]', async () => {
    next({ text: 'x y' });
    const res = await fetch(`${fake.url}/models/fake-model:streamGenerateContent?alt=sse`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
    });
    const raw = await res.text();
    expect(raw.split('\r\n\r\n').filter(Boolean)).toHaveLength(2);
    expect(raw.endsWith('\r\n\r\n')).toBe(true);
    expect(raw).not.toContain('[DONE]');
  });
});
