import OpenAI from 'openai';
import { SqlStore } from '../src/stores/sql/sql-store';
import { DecisionTraceWriter } from '../src/traces/decision-trace.writer';
import { PRO_KEY, startTestApp, TestApp } from './support/app';
import { rejectedWith } from './support/kit';

/** The chat path end to end through the official `openai` SDK, on the offline `mock` family. */
const YAML = `
providers:
  mock: { family: mock }
  mock2: { family: mock }
models:
  fast: { provider: mock, upstream: "mock-fast", type: chat, cost: { input_per_mtok: 1, output_per_mtok: 2 } }
  broken: { provider: mock2, upstream: "mock-broken+error-503", type: chat }
  rate-limited: { provider: mock2, upstream: "mock-429+error-429", type: chat }
  picky: { provider: mock2, upstream: "mock-picky+error-422", type: chat }
  slow: { provider: mock, upstream: "mock-slow+slow-40", type: chat }
  flaky-stream: { provider: mock, upstream: "mock-flaky+fail-after-2", type: chat }
  thinker: { provider: mock, upstream: "mock-thinker+reasoning", type: chat }
  embed: { provider: mock, type: embedding }
routes:
  - { name: auto, models: [auto], strategy: ordered, targets: [mock2/broken, mock/fast] }
  - { name: supported, models: [support], strategy: ordered, targets: [mock/fast], template: support }
templates:
  support: { system: "You help {{customer}} with {{product}}." }
firewall:
  rules:
    - { id: secrets, pattern: '(?i)api[_-]?key\\s*[:=]', action: block }
    - { id: cards, pattern: '\\d{4}-\\d{4}-\\d{4}-\\d{4}', action: redact, replacement: "[card]" }
organizations:
  acme:
    plan: pro
    features: [has_test_ab, feedback_routing, explain]
    api_keys: [ { id: acme-rw, key: "${PRO_KEY}" } ]
  tiny:
    plan: free
    monthly_request_limit: 2
    api_keys: [ { id: tiny-rw, key: "gw-tiny-key" } ]
`;

let t: TestApp;
let client: OpenAI;
beforeAll(async () => {
  t = await startTestApp({ yaml: YAML });
  client = new OpenAI({ apiKey: PRO_KEY, baseURL: `${t.url}/v1`, maxRetries: 0 });
});
afterAll(() => t.close());

const user = (content: string) => [{ role: 'user' as const, content }];

const apiError = (p: Promise<unknown>) => rejectedWith<InstanceType<typeof OpenAI.APIError>>(p, OpenAI.APIError);

describe('JSON completions', () => {
  it('answers with the contract shape, the catalogue id and the Gateway headers', async () => {
    const { data, response } = await client.chat.completions.create({ model: 'fast', messages: user('hello there you') }).withResponse();
    expect(data).toMatchObject({
      object: 'chat.completion',
      model: 'fast',
      choices: [{ index: 0, message: { role: 'assistant', content: 'This is a mock answer from mock-fast to a message of 3 words.' }, finish_reason: 'stop' }],
    });
    expect(data.id).toMatch(/^chatcmpl-/);
    expect(Number.isInteger(data.created)).toBe(true);
    expect(data.usage!.total_tokens).toBe(data.usage!.prompt_tokens + data.usage!.completion_tokens);
    expect(response.headers.get('gateway-provider')).toBe('mock');
    expect(response.headers.get('gateway-model')).toBe('fast');
    expect(response.headers.get('gateway-fallback-used')).toBe('false');
    expect(response.headers.get('gateway-reasoning-tokens')).toBeNull();
  });

  it('falls back down a comma list and down a route, saying so in the headers', async () => {
    for (const model of ['broken,fast', 'auto']) {
      const { data, response } = await client.chat.completions.create({ model, messages: user('hi') }).withResponse();
      expect(data.model).toBe('fast');
      expect(response.headers.get('gateway-provider')).toBe('mock');
      expect(response.headers.get('gateway-fallback-used')).toBe('true');
    }
  });

  it('reports reasoning tokens in the header and usage', async () => {
    const { data, response } = await client.chat.completions.create({ model: 'thinker', messages: user('think'), reasoning_effort: 'low' }).withResponse();
    expect(response.headers.get('gateway-reasoning-tokens')).toBe('16');
    expect(data.usage?.completion_tokens_details?.reasoning_tokens).toBe(16);
  });

  it('fills template placeholders from inputs and refuses a missing one', async () => {
    const r = await client.chat.completions.create({ model: 'support', messages: user('one two'), inputs: { customer: 'Ana', product: 'X' } } as any);
    expect(r.choices[0].message.content).toContain('2 words');
    const err = await apiError(client.chat.completions.create({ model: 'support', messages: user('x'), inputs: { customer: 'Ana' } } as any));
    expect([err.status, (err.error as any).code, (err.error as any).param]).toEqual([400, 'missing_template_input', 'inputs.product']);
  });
});

describe('firewall', () => {
  it('a block is 400 firewall_blocked with no prompt text in the body or the logs; a redact still answers', async () => {
    const err = await apiError(client.chat.completions.create({ model: 'fast', messages: user('my API_KEY = FW-MARKER-991') }));
    expect([err.status, (err.error as any).code]).toEqual([400, 'firewall_blocked']);
    expect(JSON.stringify(err.error)).not.toContain('FW-MARKER-991');
    expect(t.logs.join('\n')).not.toContain('FW-MARKER-991');
    const ok = await client.chat.completions.create({ model: 'fast', messages: user('card 1234-5678-9012-3456 please') });
    expect(ok.choices[0].message.content).toContain('mock-fast');
  });
});

describe('streaming', () => {
  it('streams chunks ending in [DONE], with the usage chunk when asked', async () => {
    const stream = await client.chat.completions.create({ model: 'slow', messages: user('a b c'), stream: true, stream_options: { include_usage: true } });
    let text = '';
    const chunks: any[] = [];
    for await (const c of stream) {
      chunks.push(c);
      text += c.choices[0]?.delta?.content ?? '';
    }
    expect(text).toBe('This is a mock answer from mock-slow to a message of 3 words.');
    expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.model === 'slow' && c.id === chunks[0].id)).toBe(true);
    expect(chunks[0].choices[0].delta.role).toBe('assistant');
    const finish = chunks.find((c) => c.choices[0]?.finish_reason);
    expect(finish.choices[0].finish_reason).toBe('stop');
    const last = chunks[chunks.length - 1];
    expect(last.choices).toEqual([]);
    expect(last.usage.total_tokens).toBeGreaterThan(0);
  });

  it('has no usage chunk without include_usage, and falls back transparently before the first byte', async () => {
    const { data: stream, response } = await client.chat.completions.create({ model: 'broken,fast', messages: user('x'), stream: true }).withResponse();
    expect(response.headers.get('gateway-fallback-used')).toBe('true');
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const chunks: any[] = [];
    for await (const c of stream) chunks.push(c);
    expect(chunks.some((c) => c.usage)).toBe(false);
    expect(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('')).toContain('mock-fast');
  });

  it('a failure after the first byte is one SSE error event and no [DONE]', async () => {
    const res = await fetch(`${t.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${PRO_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'flaky-stream', messages: user('x'), stream: true }),
    });
    expect(res.status).toBe(200);
    const text = await res.text();
    const events = text.split('\n\n').filter(Boolean);
    expect(events.filter((e) => e.includes('"delta"'))).toHaveLength(2);
    expect(events[events.length - 1]).toBe('data: {"error":{"type":"error","code":"upstream_error","message":"The upstream provider failed mid-stream."}}');
    expect(text).not.toContain('[DONE]');
    // The SDK surfaces it as an error rather than a complete answer.
    const stream = await client.chat.completions.create({ model: 'flaky-stream', messages: user('x'), stream: true });
    await expect((async () => {
      for await (const _ of stream);
    })()).rejects.toThrow();
  });
});

describe('errors through the SDK', () => {
  it.each([
    [{ temperature: 2.5 }, 'temperature'],
    [{ top_p: -0.1 }, 'top_p'],
    [{ frequency_penalty: 3 }, 'frequency_penalty'],
    [{ presence_penalty: -2.5 }, 'presence_penalty'],
    [{ reasoning_effort: 'extreme' }, 'reasoning_effort'],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x' } } }, 'response_format.json_schema.schema'],
    [{ stop: [1] }, 'stop.0'],
    [{ messages: [{ role: 'wizard', content: 'x' }] }, 'messages.0.role'],
    [{ messages: [] }, 'messages'],
    [{ max_tokens: 0 }, 'max_tokens'],
    [{ stream_options: { include_usage: true } }, 'stream_options'],
    [{ logit_bias: { '1': 2 } }, 'logit_bias'],
  ])('400 invalid_request for %j, naming %s', async (extra, param) => {
    const err = await apiError(client.chat.completions.create({ model: 'fast', messages: user('x'), ...(extra as any) }));
    expect([err.status, (err.error as any).code, (err.error as any).param]).toEqual([400, 'invalid_request', param]);
  });

  it('404 model_not_found for an unknown model', async () => {
    const err = await apiError(client.chat.completions.create({ model: 'gpt-99', messages: user('x') }));
    expect([err.status, (err.error as any).code]).toEqual([404, 'model_not_found']);
  });

  it('400 invalid_request for a bad gateway-session-id', async () => {
    const err = await apiError(client.chat.completions.create({ model: 'fast', messages: user('x') }, { headers: { 'gateway-session-id': 'bad id!' } }));
    expect([err.status, (err.error as any).param]).toEqual([400, 'gateway-session-id']);
  });

  it('502 upstream_error when every target fails; 400 upstream_invalid_request for a 4xx; 429s fall through', async () => {
    const err = await apiError(client.chat.completions.create({ model: 'broken', messages: user('x') }));
    expect([err.status, (err.error as any).code]).toEqual([502, 'upstream_error']);
    expect((err.error as any).message).toContain('503');
    const bad = await apiError(client.chat.completions.create({ model: 'picky,fast', messages: user('x') }));
    expect([bad.status, (bad.error as any).code]).toEqual([400, 'upstream_invalid_request']);
    const ok = await client.chat.completions.create({ model: 'rate-limited,fast', messages: user('x') });
    expect(ok.model).toBe('fast');
  });

  it('429 MONTHLY_LIMIT_EXCEEDED with limit, used, reset_at and Retry-After', async () => {
    const tiny = new OpenAI({ apiKey: 'gw-tiny-key', baseURL: `${t.url}/v1`, maxRetries: 0 });
    await tiny.chat.completions.create({ model: 'fast', messages: user('1') });
    await tiny.chat.completions.create({ model: 'fast', messages: user('2') });
    const err = await apiError(tiny.chat.completions.create({ model: 'fast', messages: user('3') }));
    const now = new Date();
    const reset = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
    expect(err.status).toBe(429);
    expect(err.error).toMatchObject({ type: 'error', code: 'MONTHLY_LIMIT_EXCEEDED', limit: 2, used: 2, reset_at: reset.toISOString() });
    expect(Number(err.headers?.get('retry-after'))).toBeGreaterThan(0);
  });
});

describe('decision traces', () => {
  it('records one trace per request with the session id and outcome, and no message text', async () => {
    await client.chat.completions.create(
      { model: 'broken,fast', messages: user('TRACE-MARKER-4411 please') },
      { headers: { 'gateway-session-id': 'sess-trace-1', 'x-request-id': 'req-trace-1' } },
    );
    await t.app.get(DecisionTraceWriter).flush();
    const rows = (await t.app.get(SqlStore).query<Record<string, unknown>>('SELECT * FROM decision_traces WHERE request_id = $1', ['req-trace-1'])).rows;
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      org_id: 'acme',
      api_key_id: 'acme-rw',
      session_id: 'sess-trace-1',
      endpoint: 'chat',
      requested_model: 'broken,fast',
      selected_provider: 'mock',
      selected_model: 'fast',
      fallback_used: true,
      attempts: 2,
      status: 200,
      finish_reason: 'stop',
    });
    expect(Number(rows[0].cost_usd)).toBeGreaterThan(0);
    expect(JSON.stringify(rows[0])).not.toContain('TRACE-MARKER-4411');
  });
});
