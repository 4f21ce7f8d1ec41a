import OpenAI from 'openai';
import http from 'node:http';
import { AnthropicFake } from './fakes/anthropic-fake';
import { GeminiFake } from './fakes/gemini-fake';
import { OpenAiFake } from './fakes/openai-fake';
import { PRO_KEY, startTestApp, TestApp } from './support/app';

/**
 * Chat through the official `openai` SDK against fake upstreams that speak each provider's real
 * wire format: translation both ways, streaming, headers and trailers, disconnects, timeouts.
 */
let t: TestApp;
let client: OpenAI;
const openai = new OpenAiFake({ variant: 'openai', apiKey: 'sk-openai-secret' });
const groq = new OpenAiFake({ variant: 'groq' });
const anthropic = new AnthropicFake();
const gemini = new GeminiFake();
const spare = new OpenAiFake({ variant: 'openai' });

beforeAll(async () => {
  await Promise.all([openai.start(), groq.start(), anthropic.start(), gemini.start(), spare.start()]);
  const yaml = `
providers:
  openai: { family: openai, base_url: "${openai.url}", api_key: "sk-openai-secret", timeouts: { idle_ms: 400, first_token_ms: 1500 } }
  groq: { family: groq, base_url: "${groq.url}", api_key: "gsk-secret" }
  anthropic: { family: anthropic, base_url: "${anthropic.url}", api_key: "sk-ant-secret" }
  gemini: { family: gemini, base_url: "${gemini.url}", api_key: "gm-secret" }
  spare: { family: openai, base_url: "${spare.url}", api_key: "sk-spare" }
models:
  gpt: { provider: openai, upstream: gpt-4o-mini-2024-07-18 }
  gpt-quick: { provider: openai, upstream: gpt-quick, timeouts: { total_ms: 800 } }
  llama: { provider: groq, upstream: llama-3.3-70b-versatile }
  claude: { provider: anthropic, upstream: claude-haiku-4-5, max_output_tokens: 1000 }
  flash: { provider: gemini, upstream: gemini-2.5-flash, reasoning: { mode: budget } }
  backup: { provider: spare, upstream: backup-model }
organizations:
  acme:
    plan: pro
    api_keys: [ { id: acme-rw, key: "${PRO_KEY}" } ]
`;
  t = await startTestApp({ yaml });
  client = new OpenAI({ apiKey: PRO_KEY, baseURL: `${t.url}/v1`, maxRetries: 0 });
});
afterEach(() => [openai, groq, anthropic, gemini, spare].forEach((f) => f.reset()));
afterAll(async () => {
  await t.close();
  await Promise.all([openai.stop(), groq.stop(), anthropic.stop(), gemini.stop(), spare.stop()]);
});

const msgs = [
  { role: 'developer' as const, content: 'Be brief.' },
  { role: 'user' as const, content: 'Say hello.' },
];

describe.each([
  ['gpt', 'openai', () => openai],
  ['llama', 'groq', () => groq],
  ['claude', 'anthropic', () => anthropic],
  ['flash', 'gemini', () => gemini],
])('%s via %s', (model, provider, fake) => {
  it('JSON: the contract response from the family wire format', async () => {
    fake().next({ text: 'Hello wörld ✓', usage: { prompt: 12, completion: 4 } });
    const { data, response } = await client.chat.completions.create({ model, messages: msgs, max_tokens: 50 }).withResponse();
    expect(data).toMatchObject({ object: 'chat.completion', model, choices: [{ index: 0, message: { role: 'assistant', content: 'Hello wörld ✓' }, finish_reason: 'stop' }] });
    expect(data.usage).toMatchObject({ prompt_tokens: 12, completion_tokens: 4, total_tokens: 16 });
    expect(response.headers.get('gateway-provider')).toBe(provider);
    expect(response.headers.get('gateway-model')).toBe(model);
    expect(fake().requests).toHaveLength(1);
    const sent = JSON.stringify(fake().requests[0]);
    expect(sent).not.toContain(PRO_KEY);
    expect(sent).not.toContain('"inputs"');
  });

  it('streaming: chunks as they arrive, split anywhere, ending in [DONE]', async () => {
    fake().next({ text: 'Grüße — 你好 ✓ streaming works', usage: { prompt: 5, completion: 7 }, delivery: 'byte-split', splitEvery: 2 });
    const stream = await client.chat.completions.create({ model, messages: msgs, stream: true, stream_options: { include_usage: true } });
    let text = '';
    let usage: any;
    for await (const c of stream) {
      text += c.choices[0]?.delta?.content ?? '';
      if (c.usage) usage = c.usage;
    }
    expect(text).toBe('Grüße — 你好 ✓ streaming works');
    expect(usage).toMatchObject({ prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 });
  });
});

describe('request translation', () => {
  it('openai: max_tokens becomes max_completion_tokens, the upstream name and the provider key are sent', async () => {
    openai.next({});
    await client.chat.completions.create({ model: 'gpt', messages: msgs, max_tokens: 33, temperature: 0.5 });
    const r = openai.requests[0];
    expect(r.body).toMatchObject({ model: 'gpt-4o-mini-2024-07-18', max_completion_tokens: 33, temperature: 0.5 });
    expect(r.body.max_tokens).toBeUndefined();
    expect(r.headers.authorization).toBe('Bearer sk-openai-secret');
  });

  it('max_completion_tokens wins over max_tokens', async () => {
    openai.next({});
    await client.chat.completions.create({ model: 'gpt', messages: msgs, max_tokens: 10, max_completion_tokens: 20 });
    expect(openai.requests[0].body.max_completion_tokens).toBe(20);
  });

  it('anthropic: system lifted to the top level, max_tokens always sent', async () => {
    anthropic.next({});
    await client.chat.completions.create({ model: 'claude', messages: msgs });
    const body = anthropic.requests[0].body;
    expect(body.system).toBe('Be brief.');
    expect(body.messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'Say hello.' }] }].map((m) => expect.objectContaining({ role: m.role })));
    expect(body.max_tokens).toBe(1000);
  });

  it('gemini: systemInstruction, generationConfig and the thinking budget from reasoning_effort', async () => {
    gemini.next({});
    await client.chat.completions.create({ model: 'flash', messages: msgs, max_tokens: 77, reasoning_effort: 'low' });
    const body = gemini.requests[0].body;
    expect(JSON.stringify(body.systemInstruction)).toContain('Be brief.');
    expect(body.generationConfig).toMatchObject({ maxOutputTokens: 77, thinkingConfig: expect.objectContaining({ thinkingBudget: 1024 }) });
  });
});

describe('groq timing headers and stream trailers', () => {
  const timing = { queue_time: 0.012, prompt_time: 0.034, completion_time: 0.56 };

  it('JSON: Gateway-Queue/Prompt/Completion-Time from the upstream timing fields', async () => {
    groq.next({ timing, usage: { prompt: 3, completion: 9, reasoning: 4 }, reasoning: 'hmm' });
    const { response } = await client.chat.completions.create({ model: 'llama', messages: msgs }).withResponse();
    expect(response.headers.get('gateway-queue-time')).toBe('0.012');
    expect(response.headers.get('gateway-prompt-time')).toBe('0.034');
    expect(response.headers.get('gateway-completion-time')).toBe('0.56');
    expect(response.headers.get('gateway-reasoning-tokens')).toBe('4');
  });

  it('stream: the same values as HTTP trailers and in the final usage chunk', async () => {
    groq.next({ timing, usage: { prompt: 3, completion: 9 }, usagePlacement: 'x_groq' });
    const { trailers, headers, body } = await rawPost('/v1/chat/completions', { model: 'llama', messages: msgs, stream: true, stream_options: { include_usage: true } });
    expect(headers['gateway-provider']).toBe('groq');
    expect(headers.trailer).toContain('Gateway-Queue-Time');
    expect(trailers['gateway-queue-time']).toBe('0.012');
    expect(trailers['gateway-completion-time']).toBe('0.56');
    const usageChunk = body.split('\n\n').filter((e) => e.includes('"usage"')).pop()!;
    expect(JSON.parse(usageChunk.slice(6)).usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 9, queue_time: 0.012 });
    expect(body.endsWith('data: [DONE]\n\n')).toBe(true);
  });
});

describe('disconnects, timeouts and fallback across families', () => {
  it('a client that disconnects mid-stream aborts the upstream at once and nothing else is tried', async () => {
    openai.next({ text: 'one two three four five six seven eight nine ten', chunkDelayMs: 150 });
    const ac = new AbortController();
    const stream = await client.chat.completions.create({ model: 'gpt,backup', messages: msgs, stream: true }, { signal: ac.signal });
    let chunks = 0;
    try {
      for await (const _ of stream) {
        chunks++;
        ac.abort();
      }
    } catch {
      // The SDK may end the loop quietly or throw on abort; either way the client is gone.
    }
    expect(chunks).toBe(1);
    await new Promise((r) => setTimeout(r, 200));
    expect(openai.clientAborts).toBe(1);
    expect(spare.requests).toHaveLength(0);
  });

  it('a stall before the first byte falls back to the next family transparently', async () => {
    openai.next({ stallBeforeHeadersMs: 3000 });
    spare.next({ text: 'from the spare' });
    const { data, response } = await client.chat.completions.create({ model: 'gpt,backup', messages: msgs, stream: true }).withResponse();
    let text = '';
    for await (const c of data) text += c.choices[0]?.delta?.content ?? '';
    expect(text).toBe('from the spare');
    expect(response.headers.get('gateway-fallback-used')).toBe('true');
  });

  it('a stall mid-stream is an in-band error after the idle timeout; a stall with no fallback is 504', async () => {
    openai.next({ text: 'partial answer here', stallMs: 2000 });
    const { body } = await rawPost('/v1/chat/completions', { model: 'gpt', messages: msgs, stream: true });
    expect(body).toContain('"code":"upstream_timeout"');
    expect(body).not.toContain('[DONE]');
    openai.next({ stallBeforeHeadersMs: 3000 });
    // JSON answers arrive whole, so the total timeout (here 800 ms for this model) is what bounds them.
    const err = await client.chat.completions.create({ model: 'gpt-quick', messages: msgs }).catch((e) => e);
    expect([err.status, err.error?.code]).toEqual([504, 'upstream_timeout']);
  });

  it('an upstream 400 is not a fallback trigger: 400 upstream_invalid_request, no provider body echoed', async () => {
    openai.next({ errorStatus: 400 });
    const err = await client.chat.completions.create({ model: 'gpt,backup', messages: msgs }).catch((e) => e);
    expect([err.status, err.error?.code]).toEqual([400, 'upstream_invalid_request']);
    expect(spare.requests).toHaveLength(0);
  });

  it('upstream 401/429/500 fall back; the error body never carries the upstream message', async () => {
    for (const status of [401, 429, 500]) {
      openai.next({ errorStatus: status });
      spare.next({ text: 'ok' });
      const r = await client.chat.completions.create({ model: 'gpt,backup', messages: msgs });
      expect(r.model).toBe('backup');
    }
    openai.next({ errorStatus: 500 });
    spare.next({ errorStatus: 503 });
    const err = await client.chat.completions.create({ model: 'gpt,backup', messages: msgs }).catch((e) => e);
    expect([err.status, err.error?.code]).toEqual([502, 'upstream_error']);
    expect(JSON.stringify(err.error)).not.toMatch(/fake|server_error|Internal/);
  });
});

describe('nothing secret in logs', () => {
  it('never logs provider keys, client keys or message text', () => {
    const all = t.logs.join('\n');
    for (const s of ['sk-openai-secret', 'gsk-secret', 'sk-ant-secret', 'gm-secret', PRO_KEY, 'Say hello', 'Be brief']) expect(all).not.toContain(s);
  });
});

function rawPost(path: string, body: unknown): Promise<{ status: number; headers: http.IncomingHttpHeaders; trailers: NodeJS.Dict<string>; body: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(t.url + path);
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers: { authorization: `Bearer ${PRO_KEY}`, 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, trailers: res.trailers, body: text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}
