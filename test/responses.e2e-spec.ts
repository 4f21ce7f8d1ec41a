import OpenAI from 'openai';
import { zodTextFormat } from 'openai/helpers/zod';
import http from 'node:http';
import { z } from 'zod';
import { AggregationJob } from '../src/learning/aggregation.job';
import { StatsSnapshot } from '../src/learning/model-stats';
import { SqlStore } from '../src/stores/sql/sql-store';
import { DecisionTraceWriter } from '../src/traces/decision-trace.writer';
import { AnthropicFake } from './fakes/anthropic-fake';
import { GeminiFake } from './fakes/gemini-fake';
import { OpenAiFake } from './fakes/openai-fake';
import { PRO_KEY, startTestApp, TestApp } from './support/app';

/**
 * `POST /v1/responses` through the official `openai` SDK (`responses.create` as JSON and as a
 * stream, the `responses.stream` and `responses.parse` helpers) against the offline mock and fake
 * OpenAI, Anthropic and Gemini upstreams: the Responses wire format mapped onto the chat pipeline
 * and translated to each family, with the chat path's fallback, headers, trailers and traces.
 */
let t: TestApp;
let client: OpenAI;
const openai = new OpenAiFake({ variant: 'openai' });
const anthropic = new AnthropicFake();
const gemini = new GeminiFake();
const fakes = [openai, anthropic, gemini];

beforeAll(async () => {
  await Promise.all(fakes.map((f) => f.start()));
  const yaml = `
providers:
  openai: { family: openai, base_url: "${openai.url}", api_key: "sk-openai-secret" }
  anthropic: { family: anthropic, base_url: "${anthropic.url}", api_key: "sk-ant-secret" }
  gemini: { family: gemini, base_url: "${gemini.url}", api_key: "gm-secret" }
  mock: { family: mock }
models:
  gpt: { provider: openai, upstream: gpt-4o-mini }
  claude: { provider: anthropic, upstream: claude-haiku-4-5, max_output_tokens: 1000 }
  flash: { provider: gemini, upstream: gemini-2.5-flash }
  local: { provider: mock, upstream: mock-local, reasoning: { mode: effort } }
  thinker: { provider: mock, upstream: "mock-thinker+reasoning" }
  broken: { provider: mock, upstream: "mock-broken+error-503" }
  cut: { provider: mock, upstream: "mock-cut+fail-after-2" }
  short: { provider: mock, upstream: "mock-short+length" }
  learner: { provider: mock, upstream: mock-learner }
organizations:
  acme:
    plan: pro
    api_keys: [ { id: acme-rw, key: "${PRO_KEY}" } ]
`;
  t = await startTestApp({ yaml });
  client = new OpenAI({ apiKey: PRO_KEY, baseURL: `${t.url}/v1`, maxRetries: 0 });
});
afterEach(() => fakes.forEach((f) => f.reset()));
afterAll(async () => {
  await t.close();
  await Promise.all(fakes.map((f) => f.stop()));
});

type Event = OpenAI.Responses.ResponseStreamEvent;

async function events(params: Omit<OpenAI.Responses.ResponseCreateParamsStreaming, 'stream'>): Promise<Event[]> {
  const stream = await client.responses.create({ ...params, stream: true });
  const out: Event[] = [];
  for await (const e of stream) out.push(e);
  return out;
}

function rawPost(path: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; headers: http.IncomingHttpHeaders; trailers: NodeJS.Dict<string>; body: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(t.url + path);
    const payload = typeof body === 'string' ? body : JSON.stringify(body);
    const req = http.request(
      { host: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers: { authorization: `Bearer ${PRO_KEY}`, 'content-type': 'application/json', ...headers } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, trailers: res.trailers, body: text }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

async function traces(where: string, params: unknown[]): Promise<Array<Record<string, unknown>>> {
  await t.app.get(DecisionTraceWriter).flush();
  return (await t.app.get(SqlStore).query<Record<string, unknown>>(`SELECT * FROM decision_traces WHERE ${where} ORDER BY id`, params)).rows;
}

const weatherTool = {
  type: 'function' as const,
  name: 'get_weather',
  description: 'The weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
  strict: true,
};

describe('against the mock', () => {
  it('JSON: the Response object, the request echoed, usage, and the Gateway-* headers', async () => {
    const { data, response } = await client.responses
      .create({ model: 'local', input: 'Say hello', instructions: 'Be brief.', max_output_tokens: 64, temperature: 0.2, metadata: { team: 'a' }, store: true })
      .withResponse();
    expect(data.id).toMatch(/^resp_/);
    expect(data).toMatchObject({
      object: 'response',
      status: 'completed',
      model: 'local',
      error: null,
      incomplete_details: null,
      instructions: 'Be brief.',
      max_output_tokens: 64,
      temperature: 0.2,
      metadata: { team: 'a' },
      tools: [],
      tool_choice: 'auto',
      parallel_tool_calls: true,
      store: false,
    });
    expect(data.output).toHaveLength(1);
    expect(data.output[0]).toMatchObject({ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', annotations: [] }] });
    expect(data.output_text.length).toBeGreaterThan(0);
    expect(data.usage!.total_tokens).toBe(data.usage!.input_tokens + data.usage!.output_tokens);
    expect(data.usage).toMatchObject({ input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } });
    expect(response.headers.get('gateway-provider')).toBe('mock');
    expect(response.headers.get('gateway-model')).toBe('local');
    expect(response.headers.get('gateway-fallback-used')).toBe('false');
  });

  it('stream: the Responses event sequence with sequence numbers, the text deltas adding up to the completed response', async () => {
    const ev = await events({ model: 'local', input: 'Say hello to the stream' });
    const types = ev.map((e) => e.type);
    expect(types.slice(0, 4)).toEqual(['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
    expect(types.slice(-4)).toEqual(['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed']);
    expect(ev.map((e) => e.sequence_number)).toEqual(ev.map((_, i) => i));
    const text = ev.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : [])).join('');
    const done = ev[ev.length - 1] as OpenAI.Responses.ResponseCompletedEvent;
    expect(done.response.output_text).toBe(text);
    expect(done.response.usage!.output_tokens).toBeGreaterThan(0);
    expect(done.response.model).toBe('local');
  });

  it('the responses.stream helper: delta snapshots and the final response', async () => {
    const stream = client.responses.stream({ model: 'local', input: 'Stream with the helper' });
    let snapshot = '';
    stream.on('response.output_text.delta', (e) => (snapshot = e.snapshot));
    const final = await stream.finalResponse();
    expect(final.status).toBe('completed');
    expect(final.output_text).toBe(snapshot);
    expect(snapshot.length).toBeGreaterThan(0);
  });

  it('reasoning.effort: a reasoning item before the message, as JSON and as reasoning_text events', async () => {
    const r = await client.responses.create({ model: 'local', input: 'think about this', reasoning: { effort: 'low' } });
    expect(r.output.map((o) => o.type)).toEqual(['reasoning', 'message']);
    expect((r.output[0] as OpenAI.Responses.ResponseReasoningItem).content![0].text).toContain('Mock reasoning at low effort');
    expect(r.reasoning).toMatchObject({ effort: 'low' });

    const ev = await events({ model: 'local', input: 'think about this', reasoning: { effort: 'low' } });
    expect(ev.map((e) => e.type)).toEqual(expect.arrayContaining(['response.reasoning_text.delta', 'response.reasoning_text.done']));
    const firstText = ev.findIndex((e) => e.type === 'response.output_text.delta');
    const reasoningDone = ev.findIndex((e) => e.type === 'response.reasoning_text.done');
    expect(reasoningDone).toBeGreaterThan(-1);
    expect(reasoningDone).toBeLessThan(firstText);
  });

  it('function tools round trip: a function_call item, the output items and a function_call_output sent back, the answer', async () => {
    const input: OpenAI.Responses.ResponseInput = [{ role: 'user', content: 'Weather in Paris?' }];
    const first = await client.responses.create({ model: 'local', input, tools: [weatherTool] });
    const call = first.output.find((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === 'function_call')!;
    expect(call).toMatchObject({ type: 'function_call', name: 'get_weather', status: 'completed' });
    expect(call.call_id).toBeTruthy();
    expect(first.tools).toEqual([weatherTool]);
    const second = await client.responses.create({
      model: 'local',
      input: [...input, ...first.output, { type: 'function_call_output', call_id: call.call_id, output: '{"temp":21}' }],
      tools: [weatherTool],
    });
    expect(second.output.map((o) => o.type)).toEqual(['message']);
    expect(second.output_text.length).toBeGreaterThan(0);
  });

  it('text.format json_schema: the responses.parse helper gets the parsed object', async () => {
    const City = z.object({ city: z.string(), zip: z.string() });
    const r = await client.responses.parse({ model: 'local', input: 'Where?', text: { format: zodTextFormat(City, 'city') } });
    expect(City.parse(r.output_parsed)).toEqual(r.output_parsed);
    expect(r.text).toMatchObject({ format: { type: 'json_schema', name: 'city' } });
  });

  it('a cut answer (finish length) is incomplete with max_output_tokens, as JSON and as the final event', async () => {
    const r = await client.responses.create({ model: 'short', input: 'long story' });
    expect(r).toMatchObject({ status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } });
    const ev = await events({ model: 'short', input: 'long story' });
    expect(ev[ev.length - 1]).toMatchObject({ type: 'response.incomplete', response: { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } } });
    expect(ev.some((e) => e.type === 'response.completed')).toBe(false);
  });

  it('fallback before the first output is invisible: a normal stream, Gateway-Fallback-Used true, traced', async () => {
    const { data: stream, response } = await client.responses
      .create({ model: 'broken,local', input: 'hi', stream: true }, { headers: { 'gateway-session-id': 'resp-fallback-1' } })
      .withResponse();
    const ev: Event[] = [];
    for await (const e of stream) ev.push(e);
    expect(response.headers.get('gateway-fallback-used')).toBe('true');
    expect(response.headers.get('gateway-model')).toBe('local');
    expect(ev[0].type).toBe('response.created');
    expect(ev[ev.length - 1].type).toBe('response.completed');
    expect(ev.some((e) => e.type === 'response.failed' || e.type === 'error')).toBe(false);
    const rows = await traces('session_id = $1', ['resp-fallback-1']);
    expect(rows).toEqual([
      expect.objectContaining({
        endpoint: 'responses',
        selected_model: 'local',
        fallback_used: true,
        status: 200,
        failed_attempts: [{ provider: 'mock', model: 'broken', error: 'status', status: 503 }],
      }),
    ]);
  });

  it('a failure after the first output: response.failed, no response.completed, traced as 502', async () => {
    const ev = await (async () => {
      const stream = await client.responses.create({ model: 'cut', input: 'one two three four five six', stream: true }, { headers: { 'gateway-session-id': 'resp-cut-1' } });
      const out: Event[] = [];
      for await (const e of stream) out.push(e);
      return out;
    })();
    const types = ev.map((e) => e.type);
    expect(types).toContain('response.output_text.delta');
    expect(types[types.length - 1]).toBe('response.failed');
    expect(types).not.toContain('response.completed');
    expect(types).not.toContain('response.output_item.done');
    const failed = ev[ev.length - 1] as OpenAI.Responses.ResponseFailedEvent;
    expect(failed.response).toMatchObject({ status: 'failed', error: { code: 'server_error', message: 'The upstream provider failed mid-stream.' } });
    expect(ev.map((e) => e.sequence_number)).toEqual(ev.map((_, i) => i));
    const rows = await traces('session_id = $1', ['resp-cut-1']);
    expect(rows).toEqual([expect.objectContaining({ endpoint: 'responses', status: 502, error_code: 'upstream_error', selected_model: 'cut' })]);
  });

  it('the decision trace: endpoint responses, the session id, tokens and finish reason', async () => {
    const r = await client.responses.create({ model: 'local', input: 'trace me' }, { headers: { 'gateway-session-id': 'resp-trace-1' } });
    const rows = await traces('session_id = $1', ['resp-trace-1']);
    expect(rows).toEqual([
      expect.objectContaining({
        endpoint: 'responses',
        org_id: 'acme',
        api_key_id: 'acme-rw',
        requested_model: 'local',
        selected_provider: 'mock',
        selected_model: 'local',
        status: 200,
        prompt_tokens: r.usage!.input_tokens,
        completion_tokens: r.usage!.output_tokens,
        finish_reason: 'stop',
      }),
    ]);
    const stored = JSON.stringify(rows);
    expect(stored).not.toContain('trace me');
  });

  it('stream trailers: usage-derived Gateway-* values after the last event', async () => {
    const { status, headers, trailers, body } = await rawPost('/v1/responses', { model: 'thinker', input: 'think', stream: true });
    expect(status).toBe(200);
    expect(headers['content-type']).toContain('text/event-stream');
    expect(headers.trailer).toContain('Gateway-Reasoning-Tokens');
    expect(trailers['gateway-reasoning-tokens']).toBe('16');
    const frames = body.split('\n\n').filter(Boolean);
    expect(frames[0]).toMatch(/^event: response\.created\ndata: \{"type":"response\.created","sequence_number":0,/);
    expect(frames[frames.length - 1]).toMatch(/^event: response\.completed\ndata: /);
    const { data, response } = await client.responses.create({ model: 'thinker', input: 'think' }).withResponse();
    expect(response.headers.get('gateway-reasoning-tokens')).toBe('16');
    expect(data.usage!.output_tokens_details.reasoning_tokens).toBe(16);
  });
});

describe('the learning loop', () => {
  it('counts a Responses session like a chat one: its feedback is a sample of the pair that served it', async () => {
    await client.responses.create({ model: 'learner', input: 'learn from me' }, { headers: { 'gateway-session-id': 'resp-learn-1' } });
    const feedback = await fetch(`${t.url}/v1/feedback`, {
      method: 'POST',
      headers: { authorization: `Bearer ${PRO_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ session_id: 'resp-learn-1', score: 9, useful: true }),
    });
    expect(feedback.status).toBe(200);
    await t.app.get(DecisionTraceWriter).flush();
    expect(await t.app.get(AggregationJob).run()).toEqual({ aggregation: 'done', snapshot: 'refreshed' });
    expect(t.app.get(StatsSnapshot).get('acme', 'mock', 'learner')).toMatchObject({ requests: 1, successRate: 1, n: 1, npsPromoters: 1 });
  });
});

describe.each([
  ['gpt', 'openai', () => openai],
  ['claude', 'anthropic', () => anthropic],
  ['flash', 'gemini', () => gemini],
])('%s via %s', (model, provider, fake) => {
  it('JSON: instructions and input translated to the family, the answer mapped back', async () => {
    fake().next({ text: 'Hello wörld ✓', usage: { prompt: 12, completion: 4 } });
    const { data, response } = await client.responses.create({ model, instructions: 'Be brief.', input: 'Say hello.', max_output_tokens: 50 }).withResponse();
    expect(data).toMatchObject({ status: 'completed', model, output_text: 'Hello wörld ✓', usage: { input_tokens: 12, output_tokens: 4, total_tokens: 16 } });
    expect(response.headers.get('gateway-provider')).toBe(provider);
    expect(fake().requests).toHaveLength(1);
    const body = fake().requests[0].body;
    if (provider === 'openai') {
      expect(body.messages).toEqual([{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Say hello.' }]);
      expect(body.max_completion_tokens).toBe(50);
    } else if (provider === 'anthropic') {
      expect(JSON.stringify(body.system)).toContain('Be brief.');
      expect(body.messages).toEqual([{ role: 'user', content: expect.anything() }]);
      expect(body.max_tokens).toBe(50);
    } else {
      expect(JSON.stringify(body.systemInstruction)).toContain('Be brief.');
      expect(body.contents).toHaveLength(1);
      expect(body.generationConfig.maxOutputTokens).toBe(50);
    }
    expect(JSON.stringify(body)).not.toContain(PRO_KEY);
  });

  it('stream: text deltas from the family stream, completed with usage', async () => {
    fake().next({ text: 'Grüße — streaming works', usage: { prompt: 5, completion: 7 }, delivery: 'byte-split', splitEvery: 2 });
    const ev = await events({ model, input: 'Stream please.' });
    const text = ev.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : [])).join('');
    expect(text).toBe('Grüße — streaming works');
    expect(ev[ev.length - 1]).toMatchObject({ type: 'response.completed', response: { output_text: text, usage: { input_tokens: 5, output_tokens: 7 } } });
  });

  it('function tools round trip: the call mapped back, the function_call_output sent in the family shape', async () => {
    fake().next({ toolCall: { id: 'call_w1', name: 'get_weather', arguments: '{"city":"Paris"}' } });
    const input: OpenAI.Responses.ResponseInput = [{ role: 'user', content: 'Weather in Paris?' }];
    const first = await client.responses.create({ model, input, tools: [weatherTool] });
    const call = first.output.find((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === 'function_call')!;
    expect(call).toMatchObject({ name: 'get_weather', arguments: '{"city":"Paris"}' });
    const sentTools = JSON.stringify(fake().requests[0].body);
    expect(sentTools).toContain('get_weather');
    expect(sentTools).toContain('The weather in a city');

    fake().next({ text: 'Sunny, 21°C.' });
    const second = await client.responses.create({
      model,
      input: [...input, ...first.output, { type: 'function_call_output', call_id: call.call_id, output: 'sunny-21' }],
      tools: [weatherTool],
    });
    expect(second.output_text).toBe('Sunny, 21°C.');
    const sent = fake().requests[1].body;
    const wire = JSON.stringify(sent);
    expect(wire).toContain('sunny-21');
    if (provider === 'openai') {
      expect(sent.messages.slice(1)).toEqual([
        expect.objectContaining({ role: 'assistant', tool_calls: [expect.objectContaining({ id: call.call_id, function: { name: 'get_weather', arguments: '{"city":"Paris"}' } })] }),
        { role: 'tool', tool_call_id: call.call_id, content: 'sunny-21' },
      ]);
    } else if (provider === 'anthropic') {
      expect(wire).toContain('"tool_use"');
      expect(wire).toContain('"tool_result"');
    } else {
      expect(wire).toContain('functionCall');
      expect(wire).toContain('functionResponse');
    }
  });

  it('stream: a function call as function_call_arguments events', async () => {
    fake().next({ toolCall: { id: 'call_s1', name: 'get_weather', arguments: '{"city":"Oslo"}' } });
    const ev = await events({ model, input: 'Weather in Oslo?', tools: [weatherTool] });
    const done = ev.find((e): e is OpenAI.Responses.ResponseFunctionCallArgumentsDoneEvent => e.type === 'response.function_call_arguments.done')!;
    expect(done).toMatchObject({ name: 'get_weather', arguments: '{"city":"Oslo"}' });
    const completed = ev[ev.length - 1] as OpenAI.Responses.ResponseCompletedEvent;
    expect(completed.type).toBe('response.completed');
    expect(completed.response.output).toEqual([expect.objectContaining({ type: 'function_call', name: 'get_weather', arguments: '{"city":"Oslo"}' })]);
  });

  it('text.format json_schema: the structured-output path of the family, the JSON answer', async () => {
    const answer = { city: 'Paris', zip: '75001' };
    fake().next({ text: JSON.stringify(answer) });
    const schema = { type: 'object', properties: { city: { type: 'string' }, zip: { type: 'string' } }, required: ['city', 'zip'], additionalProperties: false };
    const r = await client.responses.create({ model, input: 'Where?', text: { format: { type: 'json_schema', name: 'place', schema, strict: true } } });
    expect(JSON.parse(r.output_text)).toEqual(answer);
    expect(r.output.map((o) => o.type)).toEqual(['message']);
    if (provider === 'openai') expect(fake().requests[0].body.response_format).toEqual({ type: 'json_schema', json_schema: { name: 'place', schema, strict: true } });
  });
});

describe('refused before any provider is called', () => {
  const post = (body: unknown) => rawPost('/v1/responses', body);

  it.each([
    [{ previous_response_id: 'resp_123' }, 'previous_response_id', /stateless/],
    [{ conversation: 'conv_1' }, 'conversation', /stateless/],
    [{ background: true }, 'background', /stateless/],
    [{ tools: [{ type: 'web_search' }] }, 'tools.0.type', /hosted tools/],
    [{ tools: [{ type: 'code_interpreter', container: { type: 'auto' } }] }, 'tools.0.type', /hosted tools/],
    [{ tools: [weatherTool, { type: 'image_generation' }] }, 'tools.1.type', /hosted tools/],
    [{ frobnicate: true }, 'frobnicate', /not a supported field/],
    [{ messages: [{ role: 'user', content: 'x' }] }, 'messages', /not a supported field/],
    [{ input: [] }, 'input', /non-empty/],
    [{ input: [{ type: 'message', role: 'user', content: 42 }] }, 'input.0.content', /string or a non-empty array/],
    [{ input: [{ type: 'item_reference', id: 'msg_1' }] }, 'input.0.type', /stateless/],
    [{ truncation: 'auto' }, 'truncation', /never drops/],
    [{ include: ['message.output_text.logprobs'] }, 'include.0', /logprobs/],
    [{ temperature: 9 }, 'temperature', /between 0 and 2/],
    [{ model: '' }, 'model', /not be empty/],
  ])('%j is 400 naming %s', async (extra, param, message) => {
    const r = await post({ model: 'gpt', input: 'hello', ...(extra as object) });
    expect(r.status).toBe(400);
    const err = JSON.parse(r.body).error;
    expect(err).toMatchObject({ code: 'invalid_request', param });
    expect(err.message).toMatch(message);
    expect(openai.requests).toHaveLength(0);
  });

  it('bad JSON, a non-object body and strings from Object.prototype are 400, never 500', async () => {
    for (const body of ['{"model":', '[1,2]', '{"__proto__":{"x":1},"model":"gpt","input":"x"}', '{"model":"gpt","input":"x","constructor":1}']) {
      const r = await post(body);
      expect({ body, status: r.status }).toEqual({ body, status: 400 });
      expect(JSON.parse(r.body).error.code).toEqual(expect.any(String));
    }
    // A model named like an Object.prototype member is an unknown model, as on chat.
    const r = await post({ model: 'toString', input: 'x' });
    expect([r.status, JSON.parse(r.body).error.code]).toEqual([404, 'model_not_found']);
    expect(openai.requests).toHaveLength(0);
  });

  it('a field no target of the model can take is named as the Responses API names it', async () => {
    const r = await post({ model: 'claude', input: 'x', text: { format: { type: 'json_object' } } });
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body).error).toMatchObject({ code: 'invalid_request', param: 'text.format' });
    expect(anthropic.requests).toHaveLength(0);
  });

  it('accepts and drops the documented OpenAI hints', async () => {
    openai.next({ text: 'ok' });
    const r = await post({
      model: 'gpt',
      input: 'x',
      store: false,
      service_tier: 'auto',
      prompt_cache_key: 'k',
      prompt_cache_retention: '24h',
      safety_identifier: 's',
      truncation: 'disabled',
      include: ['reasoning.encrypted_content'],
      background: false,
      text: { verbosity: 'low' },
      reasoning: { summary: 'auto' },
    });
    expect(r.status).toBe(200);
    const sent = openai.requests[0].body;
    for (const k of ['store', 'service_tier', 'prompt_cache_key', 'prompt_cache_retention', 'safety_identifier', 'truncation', 'include', 'background', 'verbosity']) {
      expect(Object.keys(sent)).not.toContain(k);
    }
  });
});
