import { Secret } from '../../src/config/secret';
import { UpstreamHttp } from '../../src/providers/http/upstream-http';
import { createOpenAiCompatibleAdapter } from '../../src/providers/openai/openai.adapter';
import type { OpenAiCompatibleFamily } from '../../src/providers/openai/variants';
import type { ChatRequest, ProviderAdapter, UpstreamTarget } from '../../src/providers/provider-adapter';
import { fakeEmbedding, OpenAiFake, OpenAiFakeVariant } from '../fakes/openai-fake';
import { eventsOf, makeTarget, providerContract, upstreamError } from './provider-contract';

const http = new UpstreamHttp();
afterAll(() => http.destroy());

const KEY = 'sk-test-key';
const AZURE_VERSION = '2024-10-21';

function setupFor(family: OpenAiCompatibleFamily & OpenAiFakeVariant) {
  return async () => {
    const fake = await new OpenAiFake({ variant: family, apiKey: KEY }).start();
    const provider = { family, base_url: fake.url, api_key: new Secret(KEY), ...(family === 'azure' ? { api_version: AZURE_VERSION } : {}) };
    return {
      adapter: createOpenAiCompatibleAdapter(http, family),
      fake,
      target: (overrides: Partial<UpstreamTarget> = {}) => ({ ...makeTarget(provider), ...overrides }),
      reportsReasoningTokens: true,
    };
  };
}

providerContract('openai', setupFor('openai'));
providerContract('groq', setupFor('groq'));
providerContract('azure', setupFor('azure'));

// Family behaviours the shared contract does not cover, through the adapter against the fake.

const REQ: ChatRequest = {
  messages: [{ role: 'developer', content: 'Be brief.' }, { role: 'user', content: 'Say hello.' }],
  max_completion_tokens: 64,
};
const ctx = (target: UpstreamTarget) => ({ target, signal: new AbortController().signal, requestId: 'req-openai' });

describe('openai-compatible adapter against the fake', () => {
  let fake: OpenAiFake;
  let adapter: ProviderAdapter;
  const target = (provider: Partial<Parameters<typeof makeTarget>[0]> = {}, upstream = 'gpt-test', model = {}) =>
    makeTarget({ family: 'openai', base_url: fake.url, api_key: new Secret(KEY), ...provider }, upstream, model);

  beforeAll(async () => {
    fake = await new OpenAiFake({ variant: 'openai', apiKey: KEY }).start();
    adapter = createOpenAiCompatibleAdapter(http, 'openai');
  });
  afterEach(() => fake.reset());
  afterAll(() => fake.stop());

  it('posts to {base}/chat/completions with the Bearer key, max_completion_tokens and the developer role kept', async () => {
    fake.next({});
    await adapter.chat(REQ, ctx(target()));
    const rec = fake.requests[0];
    expect(rec.path).toBe('/chat/completions');
    expect(rec.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(rec.body).toEqual({ model: 'gpt-test', messages: REQ.messages, max_completion_tokens: 64 });
  });

  it('asks for stream usage and reports it once, after the finish', async () => {
    fake.next({ usage: { prompt: 4, completion: 6, reasoning: 2 } });
    const events = await eventsOf(await adapter.chatStream(REQ, ctx(target())));
    expect(fake.requests[0].body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    expect(events.at(-2)).toEqual({ type: 'finish', index: 0, finish_reason: 'stop' });
    expect(events.at(-1)).toEqual({ type: 'usage', usage: { prompt_tokens: 4, completion_tokens: 6, total_tokens: 10, reasoning_tokens: 2 } });
  });

  it('reads usage placed on the finish chunk', async () => {
    fake.next({ usage: { prompt: 3, completion: 5 }, usagePlacement: 'finish' });
    const usages = (await eventsOf(await adapter.chatStream(REQ, ctx(target())))).filter((e) => e.type === 'usage');
    expect(usages).toEqual([{ type: 'usage', usage: expect.objectContaining({ prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 }) }]);
  });

  it('streams reasoning text and n choices with their indexes', async () => {
    fake.next({ text: 'ok then', reasoning: 'let me think' });
    const events = await eventsOf(await adapter.chatStream({ ...REQ, n: 2 }, ctx(target())));
    expect(fake.requests[0].body.n).toBe(2);
    const text = (i: number) => events.map((e) => (e.type === 'delta' && e.index === i ? (e.content ?? '') : '')).join('');
    const reasoning = events.map((e) => (e.type === 'delta' && e.index === 0 ? (e.reasoning ?? '') : '')).join('');
    expect([text(0), text(1), reasoning]).toEqual(['ok then', 'ok then', 'let me think']);
    expect(events.filter((e) => e.type === 'finish')).toHaveLength(2);
  });

  it('keeps the error code and retry-after of a 429 and never copies the body into the message kind', async () => {
    fake.next({ errorStatus: 429, retryAfter: 3 });
    const err = await upstreamError(adapter.chat(REQ, ctx(target())));
    expect(err.opts).toMatchObject({ status: 429, retryAfterMs: 3000, code: 'rate_limit_exceeded' });
    expect(err.detail).toContain('Rate limit reached');
  });

  it('a wrong key is a 401 status error', async () => {
    fake.next({});
    const err = await upstreamError(adapter.chat(REQ, ctx(target({ api_key: new Secret('sk-wrong') }))));
    expect(err.opts).toMatchObject({ status: 401, code: 'invalid_api_key' });
  });

  it('a non-streaming body cut in the middle is an error, not a result', async () => {
    fake.next({ truncate: true });
    const err = await upstreamError(adapter.chat(REQ, ctx(target())));
    expect(['protocol', 'network']).toContain(err.kind);
    await new Promise((r) => setTimeout(r, 50));
    expect(fake.clientAborts).toBe(0);
  });

  it('embeds with encoding_format float and dimensions, vectors in input order', async () => {
    const r = await adapter.embed!({ input: ['alpha', 'beta', 'gamma'], dimensions: 8 }, ctx(target({}, 'text-embedding-3-small')));
    const rec = fake.requests[0];
    expect(rec.path).toBe('/embeddings');
    expect(rec.body).toEqual({ model: 'text-embedding-3-small', input: ['alpha', 'beta', 'gamma'], encoding_format: 'float', dimensions: 8 });
    expect(r.embeddings).toEqual(['alpha', 'beta', 'gamma'].map((t) => fakeEmbedding(t, 8)));
    expect(r.usage.prompt_tokens).toBeGreaterThan(0);
  });

  it('an embeddings error is a status error', async () => {
    fake.next({ errorStatus: 503 });
    expect((await upstreamError(adapter.embed!({ input: ['x'] }, ctx(target())))).status).toBe(503);
  });
});

describe('groq variant against the fake', () => {
  let fake: OpenAiFake;
  const adapter = createOpenAiCompatibleAdapter(http, 'groq');
  const target = () => makeTarget({ family: 'groq', base_url: fake.url, api_key: new Secret(KEY) }, 'llama-3.3-70b-versatile');

  beforeAll(async () => {
    fake = await new OpenAiFake({ variant: 'groq', apiKey: KEY }).start();
  });
  afterEach(() => fake.reset());
  afterAll(() => fake.stop());

  it('rewrites developer to system and reports timing on JSON answers', async () => {
    fake.next({ usage: { prompt: 20, completion: 40 }, timing: { queue_time: 0.5, prompt_time: 0.25, completion_time: 1.5 } });
    const r = await adapter.chat(REQ, ctx(target()));
    expect(fake.requests[0].body.messages[0]).toEqual({ role: 'system', content: 'Be brief.' });
    expect(r.timing).toEqual({ queue_time: 0.5, prompt_time: 0.25, completion_time: 1.5 });
  });

  it('counts usage once when it is both in x_groq.usage and in a separate usage chunk', async () => {
    fake.next({ usage: { prompt: 20, completion: 40 }, timing: { queue_time: 0.012, prompt_time: 0.002, completion_time: 0.09 } });
    const usages = (await eventsOf(await adapter.chatStream(REQ, ctx(target())))).filter((e) => e.type === 'usage');
    expect(usages).toEqual([
      { type: 'usage', usage: { prompt_tokens: 20, completion_tokens: 40, total_tokens: 60, reasoning_tokens: 0 }, timing: { queue_time: 0.012, prompt_time: 0.002, completion_time: 0.09 } },
    ]);
  });

  it('reads usage and timing from x_groq alone (the historical placement)', async () => {
    fake.next({ usage: { prompt: 2, completion: 3 }, usagePlacement: 'x_groq' });
    const events = await eventsOf(await adapter.chatStream(REQ, ctx(target())));
    expect(events.at(-1)).toMatchObject({ type: 'usage', usage: { prompt_tokens: 2, completion_tokens: 3 }, timing: { queue_time: expect.any(Number) } });
  });

  it('sends no n (Groq refuses any n but 1) and declares no multiple choices', async () => {
    fake.next({});
    await adapter.chat({ ...REQ, n: 1 }, ctx(target()));
    expect(fake.requests[0].body).not.toHaveProperty('n');
    expect(adapter.capabilities(target()).multipleChoices).toBe(false);
  });

  it('reads reasoning from message.reasoning', async () => {
    fake.next({ text: 'ok', reasoning: 'hmm' });
    expect((await adapter.chat(REQ, ctx(target()))).choices[0].message.reasoning_content).toBe('hmm');
  });
});

describe('azure variant against the fake', () => {
  let fake: OpenAiFake;
  const adapter = createOpenAiCompatibleAdapter(http, 'azure');
  const target = (apiVersion?: string) => makeTarget({ family: 'azure', base_url: fake.url, api_key: new Secret(KEY), api_version: apiVersion }, 'my-gpt4o-deployment');

  beforeAll(async () => {
    fake = await new OpenAiFake({ variant: 'azure', apiKey: KEY }).start();
  });
  afterEach(() => fake.reset());
  afterAll(() => fake.stop());

  it('uses the deployment URL with api-version and the api-key header, no model in the body', async () => {
    fake.next({});
    await adapter.chat(REQ, ctx(target(AZURE_VERSION)));
    const rec = fake.requests[0];
    expect(rec.path).toBe(`/openai/deployments/my-gpt4o-deployment/chat/completions?api-version=${AZURE_VERSION}`);
    expect(rec.headers['api-key']).toBe(KEY);
    expect(rec.headers.authorization).toBeUndefined();
    expect(rec.body).not.toHaveProperty('model');
    expect(rec.body.messages[0].role).toBe('developer');
    expect(rec.body.max_completion_tokens).toBe(64);
  });

  it('uses the v1 GA path with the model in the body when no api_version is set', async () => {
    fake.next({});
    await adapter.chat(REQ, ctx(target()));
    expect(fake.requests[0].path).toBe('/openai/v1/chat/completions');
    expect(fake.requests[0].body.model).toBe('my-gpt4o-deployment');
  });

  it('tolerates the first chunk with empty choices and prompt_filter_results', async () => {
    fake.next({ text: 'one two' });
    const events = await eventsOf(await adapter.chatStream(REQ, ctx(target(AZURE_VERSION))));
    expect(events.filter((e) => e.type === 'delta').map((e) => (e.type === 'delta' ? e.content : ''))).toEqual(['one ', 'two']);
  });

  it("keeps Azure's content_filter code and prefers retry-after-ms", async () => {
    fake.next({ errorStatus: 400 });
    expect((await upstreamError(adapter.chat(REQ, ctx(target(AZURE_VERSION))))).opts).toMatchObject({ status: 400, code: 'content_filter' });
    fake.next({ errorStatus: 429, retryAfter: 1 });
    expect((await upstreamError(adapter.chat(REQ, ctx(target(AZURE_VERSION))))).retryAfterMs).toBe(1000);
  });

  it('embeds through the deployment URL', async () => {
    await adapter.embed!({ input: ['a'] }, ctx(target(AZURE_VERSION)));
    expect(fake.requests[0].path).toBe(`/openai/deployments/my-gpt4o-deployment/embeddings?api-version=${AZURE_VERSION}`);
    expect(fake.requests[0].body).toEqual({ input: ['a'], encoding_format: 'float' });
  });
});
