import { Secret } from '../../src/config/secret';
import { UpstreamHttp } from '../../src/providers/http/upstream-http';
import { createAnthropicAdapter } from '../../src/providers/anthropic/anthropic.adapter';
import type { UpstreamTarget } from '../../src/providers/provider-adapter';
import { UpstreamError } from '../../src/providers/upstream-error';
import { AnthropicFake } from '../fakes/anthropic-fake';
import { makeTarget, providerContract } from './provider-contract';

const http = new UpstreamHttp();
afterAll(() => http.destroy());

const fake = new AnthropicFake();
const target = (overrides: Partial<UpstreamTarget> = {}): UpstreamTarget => ({
  ...makeTarget({ family: 'anthropic', base_url: fake.url, api_key: new Secret('sk-ant-fake') }),
  ...overrides,
});

providerContract('anthropic', async () => {
  await fake.start();
  return { adapter: createAnthropicAdapter(http), fake, target, reportsReasoningTokens: true };
});

/** Anthropic-only behaviours of the fake and adapter together (the shared contract covers the rest). */
describe('anthropic adapter against the fake', () => {
  const adapter = createAnthropicAdapter(http);
  const own = new AnthropicFake();
  const ownTarget = (model: Parameters<typeof makeTarget>[2] = {}) => makeTarget({ family: 'anthropic', base_url: own.url, api_key: new Secret('sk-ant-fake') }, 'claude-fake', model);
  const ctx = (t: UpstreamTarget) => ({ target: t, signal: new AbortController().signal, requestId: 'req-anthropic' });
  beforeAll(() => own.start());
  afterEach(() => own.reset());
  afterAll(() => own.stop());

  it('posts to /v1/messages with x-api-key, anthropic-version and the mapped body', async () => {
    own.next({ text: 'ok' });
    await adapter.chat({ messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }] }, ctx(ownTarget({ max_output_tokens: 2048 })));
    const rec = own.requests[0];
    expect([rec.method, rec.path]).toEqual(['POST', '/v1/messages']);
    expect(rec.headers['x-api-key']).toBe('sk-ant-fake');
    expect(rec.headers['anthropic-version']).toBe('2023-06-01');
    expect(rec.headers['content-type']).toContain('application/json');
    expect(rec.body).toEqual({ model: 'claude-fake', max_tokens: 2048, system: 'Be brief.', messages: [{ role: 'user', content: 'Hi' }] });
  });

  it('529 overloaded_error is a status error with its code and retry-after', async () => {
    own.next(AnthropicFake.overloaded(3));
    const err = await adapter.chat({ messages: [{ role: 'user', content: 'Hi' }] }, ctx(ownTarget())).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamError);
    expect([(err as UpstreamError).kind, (err as UpstreamError).status, (err as UpstreamError).opts.code, (err as UpstreamError).retryAfterMs]).toEqual(['status', 529, 'overloaded_error', 3000]);
  });

  it('the in-band error event carries overloaded_error as its code', async () => {
    own.next({ text: 'a b c', midStreamError: true });
    const events = await adapter.chatStream({ messages: [{ role: 'user', content: 'Hi' }] }, ctx(ownTarget()));
    const err = await (async () => {
      for await (const _ of events);
    })().catch((e: unknown) => e);
    expect([(err as UpstreamError).kind, (err as UpstreamError).status, (err as UpstreamError).opts.code]).toEqual(['status', 529, 'overloaded_error']);
  });

  it('streams thinking as reasoning deltas and reports thinking tokens, with a budget the real API accepts', async () => {
    own.next({ text: 'Answer.', reasoning: 'Let me think about it', usage: { prompt: 8, completion: 30, reasoning: 21 } });
    const t = ownTarget({ reasoning: { mode: 'budget', can_disable: true, budgets: {} } });
    let reasoning = '';
    let text = '';
    const usages: unknown[] = [];
    for await (const e of await adapter.chatStream({ messages: [{ role: 'user', content: 'Hi' }], reasoning_effort: 'medium', max_completion_tokens: 100, temperature: 0.2 }, ctx(t))) {
      if (e.type === 'delta') (reasoning += e.reasoning ?? '', (text += e.content ?? ''));
      if (e.type === 'usage') usages.push(e.usage);
    }
    expect([reasoning, text]).toEqual(['Let me think about it', 'Answer.']);
    expect(usages).toEqual([{ prompt_tokens: 8, completion_tokens: 30, total_tokens: 38, reasoning_tokens: 21 }]);
    expect(own.requests[0].body).toMatchObject({ thinking: { type: 'enabled', budget_tokens: 4096 }, max_tokens: 4196 });
    expect(own.requests[0].body.temperature).toBeUndefined();
  });

  it('text then a tool_use block (block index 1): the tool call is numbered 0 among tool blocks', async () => {
    own.next({ text: 'Checking.', toolCall: { id: 'toolu_7', name: 'get_weather', arguments: '{"city":"Paris"}' } });
    const calls: unknown[] = [];
    let finish = '';
    for await (const e of await adapter.chatStream({ messages: [{ role: 'user', content: 'Weather?' }] }, ctx(ownTarget()))) {
      if (e.type === 'delta' && e.tool_calls) calls.push(...e.tool_calls);
      if (e.type === 'finish') finish = e.finish_reason;
    }
    expect(calls[0]).toEqual({ index: 0, id: 'toolu_7', type: 'function', function: { name: 'get_weather', arguments: '' } });
    expect(calls.slice(1).every((c) => (c as { index: number }).index === 0)).toBe(true);
    expect(finish).toBe('tool_calls');
  });

  it('without an API key the fake answers 401 authentication_error, as the real API does', async () => {
    own.next({ text: 'never sent' });
    const t = makeTarget({ family: 'anthropic', base_url: own.url }, 'claude-fake');
    const err = (await adapter.chat({ messages: [{ role: 'user', content: 'Hi' }] }, ctx(t)).catch((e: unknown) => e)) as UpstreamError;
    expect([err.kind, err.status, err.opts.code]).toEqual(['status', 401, 'authentication_error']);
    expect(own.requests[0].headers['x-api-key']).toBeUndefined();
  });

  it('a wrong mapping would be refused by the fake as the real API does', async () => {
    // The fake checks thinking rules; a hand-built bad body proves the check is live.
    const res = await fetch(`${own.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': 'k', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'm', max_tokens: 1024, messages: [{ role: 'system', content: 'x' }] }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
  });
});
