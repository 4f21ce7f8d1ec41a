import { AnthropicFake } from './fakes/anthropic-fake';
import { OpenAiFake } from './fakes/openai-fake';
import { PRO_KEY, startTestApp, TestApp } from './support/app';
import { OtlpReceiver, ReceivedSpan } from './support/otlp-receiver';

/**
 * OpenTelemetry traces (docs/architecture.md "OpenTelemetry traces"): the spans a collector
 * receives over OTLP/HTTP for chat (JSON and streamed), Responses, embeddings, a fallback and a
 * failed request; their GenAI attributes and parent links; the W3C trace context passed from the
 * client through the gateway to the upstream; nothing secret in what is exported; and, with tracing
 * off, the client's `traceparent` passed through unchanged.
 */
const SECRET_PROMPT = 'OTEL-PROMPT-MARKER-7731 the prompt text that must never be exported';
const SECRET_ANSWER = 'OTEL-ANSWER-MARKER-5519 completion text';
const SECRET_INPUT = 'OTEL-EMBED-MARKER-2203';

const CLIENT_TRACE = '0af7651916cd43dd8448eb211c80319c';
const CLIENT_SPAN = 'b7ad6b7169203331';
const TRACEPARENT = `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`;
const TRACESTATE = 'vendor=opaque-value';

const receiver = new OtlpReceiver();
const openai = new OpenAiFake({ variant: 'openai', apiKey: 'sk-otel-openai-secret' });
const spare = new OpenAiFake({ variant: 'openai', apiKey: 'sk-otel-spare-secret' });
const anthropic = new AnthropicFake();
const fakes = [openai, spare, anthropic];
let t: TestApp;

const yaml = () => `
providers:
  openai: { family: openai, base_url: "${openai.url}", api_key: "sk-otel-openai-secret" }
  spare: { family: openai, base_url: "${spare.url}", api_key: "sk-otel-spare-secret" }
  anthropic: { family: anthropic, base_url: "${anthropic.url}", api_key: "sk-otel-ant-secret" }
models:
  gpt: { provider: openai, upstream: gpt-4o-mini-2024-07-18 }
  backup: { provider: spare, upstream: backup-model }
  claude: { provider: anthropic, upstream: claude-haiku-4-5 }
  embed-small: { type: embedding, provider: openai, upstream: text-embedding-3-small }
organizations:
  acme:
    plan: pro
    api_keys: [ { id: acme-rw, key: "${PRO_KEY}" } ]
`;

beforeAll(async () => {
  await Promise.all([receiver.start(), ...fakes.map((f) => f.start())]);
  t = await startTestApp({
    yaml: yaml(),
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '20', OTEL_SERVICE_NAME: 'gateway-e2e', OTEL_EXPORTER_OTLP_HEADERS: 'x-collector-token=tok%3Dabc' },
  });
}, 90_000);
afterEach(() => fakes.forEach((f) => f.reset()));
afterAll(async () => {
  await t?.close();
  await Promise.all([receiver.stop(), ...fakes.map((f) => f.stop())]);
});

async function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; text: string; requestId: string }> {
  const res = await fetch(t.url + path, {
    method: 'POST',
    headers: { authorization: `Bearer ${PRO_KEY}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text(), requestId: res.headers.get('x-request-id')! };
}

const traced = { traceparent: TRACEPARENT, tracestate: TRACESTATE };

/** The server span of a request (by its request id) and its client spans, once all have arrived. */
async function spansOf(requestId: string, attempts: number): Promise<{ server: ReceivedSpan; calls: ReceivedSpan[] }> {
  return receiver.waitFor((spans) => {
    const server = spans.find((s) => s.kind === 2 && s.attributes['gateway.request_id'] === requestId);
    if (!server) return undefined;
    const calls = spans.filter((s) => s.parentSpanId === server.spanId).sort((a, b) => Number(a.attributes['gateway.attempt']) - Number(b.attributes['gateway.attempt']));
    return calls.length === attempts && { server, calls };
  });
}

/** Span times from different spans agree to a millisecond: each span's clock is anchored to the wall clock when it starts. */
const MS = 1_000_000n;

const traceparentParts = (h: unknown) => /^00-([0-9a-f]{32})-([0-9a-f]{16})-(0[01])$/.exec(String(h))!;

describe('chat completions', () => {
  it('JSON: a SERVER span child of the client span, a CLIENT span per upstream call, GenAI attributes; the upstream gets the call span as parent', async () => {
    openai.next({ text: 'hello', usage: { prompt: 12, completion: 4 } });
    const r = await post(
      '/v1/chat/completions',
      { model: 'gpt', messages: [{ role: 'user', content: 'hi' }], max_tokens: 50, temperature: 0.2, top_p: 0.9, seed: 7, response_format: { type: 'json_object' } },
      { ...traced, 'gateway-session-id': 'sess-42' },
    );
    expect(r.status).toBe(200);
    const { server, calls } = await spansOf(r.requestId, 1);
    expect(server).toMatchObject({ traceId: CLIENT_TRACE, parentSpanId: CLIENT_SPAN, name: 'chat gpt', status: 0 });
    expect(server.resource['service.name']).toBe('gateway-e2e');
    expect(server.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'gpt',
      'gen_ai.response.model': 'gpt-4o-mini-2024-07-18',
      'gen_ai.usage.input_tokens': 12,
      'gen_ai.usage.output_tokens': 4,
      'gen_ai.response.finish_reasons': ['stop'],
      'gen_ai.request.max_tokens': 50,
      'gen_ai.request.temperature': 0.2,
      'gen_ai.request.top_p': 0.9,
      'gen_ai.request.seed': 7,
      'gen_ai.request.stream': false,
      'gen_ai.output.type': 'json',
      'gen_ai.conversation.id': 'sess-42',
      'gateway.endpoint': 'chat',
      'gateway.route': 'implicit:gpt',
      'gateway.strategy': 'direct',
      'gateway.candidates.count': 1,
      'gateway.provider': 'openai',
      'gateway.model': 'gpt',
      'gateway.fallback_used': false,
      'gateway.attempts': 1,
      'gateway.failed_attempts': 0,
      'gateway.org.id': 'acme',
      'gateway.api_key.id': 'acme-rw',
      'http.request.method': 'POST',
      'http.route': '/v1/chat/completions',
      'http.response.status_code': 200,
    });
    expect(server.attributes['error.type']).toBeUndefined();
    const [call] = calls;
    expect(call).toMatchObject({ traceId: CLIENT_TRACE, name: 'chat gpt-4o-mini-2024-07-18', kind: 3, status: 0 });
    expect(call.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'gpt-4o-mini-2024-07-18',
      'gateway.provider': 'openai',
      'gateway.model': 'gpt',
      'gateway.attempt': 1,
    });
    // Tokens once per trace: a backend summing gen_ai.usage over the spans counts them once.
    expect(call.attributes['gen_ai.usage.input_tokens']).toBeUndefined();
    // Within the server span (each span's clock is anchored to the wall clock's millisecond when it starts).
    expect(call.startNs).toBeGreaterThanOrEqual(server.startNs - MS);
    expect(call.endNs).toBeLessThanOrEqual(server.endNs + MS);
    // The upstream saw the trace continue: same trace, the call span as parent, the client's tracestate.
    const sent = openai.requests[0].headers;
    const [, traceId, parentId, flags] = traceparentParts(sent.traceparent);
    expect([traceId, parentId, flags]).toEqual([CLIENT_TRACE, call.spanId, '01']);
    expect(sent.tracestate).toBe(TRACESTATE);
    // The standard headers variable reaches the collector.
    expect(receiver.headers.some((h) => h['x-collector-token'] === 'tok=abc')).toBe(true);
  });

  it('stream: time to first token as an event and an attribute; the served call span lasts until the stream ends', async () => {
    anthropic.next({ text: 'one two three four', usage: { prompt: 5, completion: 7 }, chunkDelayMs: 5 });
    const r = await post('/v1/chat/completions', { model: 'claude', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } }, traced);
    expect(r.status).toBe(200);
    expect(r.text).toContain('[DONE]');
    const requestId = r.requestId;
    const { server, calls } = await spansOf(requestId, 1);
    expect(server.attributes).toMatchObject({
      'gen_ai.provider.name': 'anthropic',
      'gen_ai.response.model': 'claude-haiku-4-5',
      'gen_ai.request.stream': true,
      'gen_ai.usage.input_tokens': 5,
      'gen_ai.usage.output_tokens': 7,
      'gen_ai.response.finish_reasons': ['stop'],
    });
    const ttft = server.attributes['gen_ai.response.time_to_first_chunk'] as number;
    expect(ttft).toBeGreaterThan(0);
    const first = server.events.find((e) => e.name === 'gateway.first_token');
    expect(first).toBeDefined();
    expect(first!.timeNs).toBeGreaterThanOrEqual(server.startNs - MS);
    expect(first!.timeNs).toBeLessThanOrEqual(server.endNs + MS);
    const [call] = calls;
    expect(call.attributes).toMatchObject({ 'gen_ai.provider.name': 'anthropic', 'gen_ai.request.model': 'claude-haiku-4-5' });
    // Ended with the stream, after the first output (the dispatcher's attempt ends there).
    expect(call.endNs).toBeGreaterThan(first!.timeNs);
    expect(traceparentParts(anthropic.requests[0].headers.traceparent)[2]).toBe(call.spanId);
  });

  it('a client that leaves mid-stream: the spans end once the stream stops, 499 and client_closed, the call span with it', async () => {
    openai.next({ text: 'one two three four five six seven eight nine ten', chunkDelayMs: 150 });
    const ac = new AbortController();
    const res = await fetch(`${t.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${PRO_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt', messages: [{ role: 'user', content: 'hi' }], stream: true }),
      signal: ac.signal,
    });
    const requestId = res.headers.get('x-request-id')!;
    await res.body!.getReader().read();
    ac.abort();
    const { server, calls } = await spansOf(requestId, 1);
    expect(server.attributes).toMatchObject({ 'http.response.status_code': 499, 'error.type': 'client_closed', 'gen_ai.provider.name': 'openai' });
    // A client that left is not the server's failure.
    expect(server.status).toBe(0);
    expect(calls[0]).toMatchObject({ status: 2, attributes: expect.objectContaining({ 'error.type': 'client_closed' }) });
    expect(calls[0].endNs).toBeLessThanOrEqual(server.endNs + MS);
  });

  it('fallback: two call spans, the first ended by its failure (status, error type), the second serving', async () => {
    openai.next({ errorStatus: 503 });
    spare.next({ text: 'ok' });
    const r = await post('/v1/chat/completions', { model: 'gpt,backup', messages: [{ role: 'user', content: 'hi' }] }, traced);
    expect(r.status).toBe(200);
    const { server, calls } = await spansOf(r.requestId, 2);
    expect(server.attributes).toMatchObject({ 'gateway.fallback_used': true, 'gateway.attempts': 2, 'gateway.failed_attempts': 1, 'gateway.provider': 'spare', 'gateway.candidates.count': 2 });
    expect(server.status).toBe(0);
    expect(calls[0]).toMatchObject({ status: 2, attributes: expect.objectContaining({ 'error.type': '503', 'gateway.provider': 'openai', 'gateway.attempt': 1 }) });
    expect(calls[1]).toMatchObject({ status: 0, attributes: expect.objectContaining({ 'gateway.provider': 'spare', 'gen_ai.request.model': 'backup-model', 'gateway.attempt': 2 }) });
    expect(calls[1].attributes['error.type']).toBeUndefined();
    // Each upstream saw its own call span as the parent.
    expect(traceparentParts(openai.requests[0].headers.traceparent)[2]).toBe(calls[0].spanId);
    expect(traceparentParts(spare.requests[0].headers.traceparent)[2]).toBe(calls[1].spanId);
  });

  it('a failed request: the server span is an error with the error code, every call span with its failure', async () => {
    openai.next({ errorStatus: 500 });
    spare.next({ errorStatus: 429 });
    const r = await post('/v1/chat/completions', { model: 'gpt,backup', messages: [{ role: 'user', content: 'hi' }] });
    expect(r.status).toBe(502);
    const { server, calls } = await spansOf(r.requestId, 2);
    expect(server).toMatchObject({ status: 2, parentSpanId: undefined });
    expect(server.attributes).toMatchObject({ 'error.type': 'upstream_error', 'http.response.status_code': 502, 'gateway.attempts': 2, 'gateway.failed_attempts': 2 });
    expect(server.attributes['gen_ai.response.model']).toBeUndefined();
    expect(calls.map((c) => [c.status, c.attributes['error.type']])).toEqual([
      [2, '500'],
      [2, '429'],
    ]);
    // No client trace context: the gateway starts the trace and the upstream still gets it.
    expect(traceparentParts(openai.requests[0].headers.traceparent)[1]).toBe(server.traceId);
  });
});

it('Responses API: a chat operation on the responses endpoint', async () => {
  openai.next({ text: 'hello', usage: { prompt: 3, completion: 2 } });
  const r = await post('/v1/responses', { model: 'gpt', input: 'hi', max_output_tokens: 64 }, traced);
  expect(r.status).toBe(200);
  const { server, calls } = await spansOf(r.requestId, 1);
  expect(server).toMatchObject({ traceId: CLIENT_TRACE, parentSpanId: CLIENT_SPAN, name: 'chat gpt' });
  expect(server.attributes).toMatchObject({ 'gateway.endpoint': 'responses', 'gen_ai.operation.name': 'chat', 'gen_ai.request.max_tokens': 64, 'gen_ai.usage.input_tokens': 3, 'http.route': '/v1/responses' });
  expect(traceparentParts(openai.requests[0].headers.traceparent)[2]).toBe(calls[0].spanId);
});

it('embeddings: an embeddings operation with its call span', async () => {
  const r = await post('/v1/embeddings', { model: 'embed-small', input: ['a', 'b'], dimensions: 8 }, traced);
  expect(r.status).toBe(200);
  const { server, calls } = await spansOf(r.requestId, 1);
  expect(server).toMatchObject({ name: 'embeddings embed-small', traceId: CLIENT_TRACE });
  expect(server.attributes).toMatchObject({ 'gen_ai.operation.name': 'embeddings', 'gateway.endpoint': 'embeddings', 'gen_ai.embeddings.dimension.count': 8, 'gen_ai.response.model': 'text-embedding-3-small' });
  expect(calls[0]).toMatchObject({ name: 'embeddings text-embedding-3-small', kind: 3 });
  expect(traceparentParts(openai.requests[0].headers.traceparent)[2]).toBe(calls[0].spanId);
});

it('other endpoints get a server span named by route; health and metrics none', async () => {
  const res = await fetch(`${t.url}/v1/models`, { headers: { authorization: `Bearer ${PRO_KEY}`, ...traced } });
  expect(res.status).toBe(200);
  const requestId = res.headers.get('x-request-id')!;
  await fetch(`${t.url}/health/live`);
  const server = await receiver.waitFor((spans) => spans.find((s) => s.kind === 2 && s.parentSpanId === CLIENT_SPAN && s.name === 'GET /v1/models'));
  expect(server.attributes).toMatchObject({ 'http.request.method': 'GET', 'http.route': '/v1/models', 'http.response.status_code': 200 });
  expect(requestId).toBeTruthy();
  expect(receiver.spans.some((s) => String(s.attributes['http.route']).startsWith('/health'))).toBe(false);
});

it('canary: no prompt, completion, input text or key of any kind in anything exported', async () => {
  openai.next({ text: SECRET_ANSWER, usage: { prompt: 9, completion: 9 } });
  const a = await post('/v1/chat/completions', { model: 'gpt', messages: [{ role: 'system', content: SECRET_PROMPT }, { role: 'user', content: SECRET_PROMPT }], stop: [SECRET_PROMPT], user: SECRET_PROMPT }, traced);
  expect(a.text).toContain(SECRET_ANSWER);
  anthropic.next({ text: SECRET_ANSWER });
  const b = await post('/v1/chat/completions', { model: 'claude', messages: [{ role: 'user', content: SECRET_PROMPT }], stream: true });
  expect(b.text).toContain('OTEL-ANSWER-MARKER');
  openai.next({ errorStatus: 500 });
  spare.next({ text: SECRET_ANSWER });
  await post('/v1/responses', { model: 'gpt,backup', instructions: SECRET_PROMPT, input: SECRET_PROMPT });
  await post('/v1/embeddings', { model: 'embed-small', input: [SECRET_INPUT] });
  await spansOf(a.requestId, 1);
  await spansOf(b.requestId, 1);
  await receiver.waitFor((spans) => spans.filter((s) => s.attributes['gateway.endpoint'] === 'embeddings').length >= 2);
  const exported = receiver.bodies.join('\n');
  for (const secret of ['OTEL-PROMPT-MARKER', 'OTEL-ANSWER-MARKER', SECRET_INPUT, PRO_KEY, 'sk-otel-openai-secret', 'sk-otel-spare-secret', 'sk-otel-ant-secret', 'tok=abc']) {
    expect(exported).not.toContain(secret);
  }
});

describe('the export encoding', () => {
  it('OTLP protobuf by default; http/json when asked for, the same spans decoded from either', async () => {
    await spansOf((await post('/v1/chat/completions', { model: 'gpt', messages: [{ role: 'user', content: 'hi' }] })).requestId, 1);
    expect(receiver.headers.map((h) => h['content-type'])).toEqual(receiver.headers.map(() => 'application/x-protobuf'));

    const jsonReceiver = await new OtlpReceiver().start();
    const json = await startTestApp({ yaml: yaml(), env: { OTEL_EXPORTER_OTLP_ENDPOINT: jsonReceiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_BSP_SCHEDULE_DELAY: '20' } });
    try {
      const res = await fetch(json.url + '/v1/chat/completions', {
        method: 'POST',
        headers: { authorization: `Bearer ${PRO_KEY}`, 'content-type': 'application/json', ...traced },
        body: JSON.stringify({ model: 'gpt', messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(res.status).toBe(200);
      const requestId = res.headers.get('x-request-id')!;
      const server = await jsonReceiver.waitFor((spans) => spans.find((s) => s.kind === 2 && s.attributes['gateway.request_id'] === requestId));
      expect(server).toMatchObject({ traceId: CLIENT_TRACE, parentSpanId: CLIENT_SPAN, attributes: { 'gen_ai.operation.name': 'chat', 'http.response.status_code': 200 } });
      expect(jsonReceiver.headers.every((h) => h['content-type'] === 'application/json')).toBe(true);
    } finally {
      await json.close();
      await jsonReceiver.stop();
    }
  }, 90_000);
});

describe('tracing off', () => {
  let off: TestApp;
  beforeAll(async () => {
    off = await startTestApp({ yaml: yaml() });
  }, 90_000);
  afterAll(async () => off?.close());

  it("passes the client's traceparent and tracestate to the upstream unchanged; a malformed one is not passed on", async () => {
    const call = (headers: Record<string, string>) =>
      fetch(`${off.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${PRO_KEY}`, 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ model: 'gpt', messages: [{ role: 'user', content: 'hi' }] }),
      });
    expect((await call(traced)).status).toBe(200);
    expect(openai.requests[0].headers).toMatchObject({ traceparent: TRACEPARENT, tracestate: TRACESTATE });
    expect((await call({ traceparent: '00-zz-not-a-traceparent' })).status).toBe(200);
    expect(openai.requests[1].headers.traceparent).toBeUndefined();
    expect((await call({})).status).toBe(200);
    expect(openai.requests[2].headers.traceparent).toBeUndefined();
    expect(off.config.env.otel).toBeNull();
  });
});
