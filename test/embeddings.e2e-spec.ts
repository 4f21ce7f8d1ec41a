import OpenAI from 'openai';
import { MAX_INPUTS } from '../src/embeddings/embeddings-request';
import { SqlStore } from '../src/stores/sql/sql-store';
import { DecisionTraceWriter } from '../src/traces/decision-trace.writer';
import { AnthropicFake } from './fakes/anthropic-fake';
import { fakeEmbedding as geminiVector, GeminiFake } from './fakes/gemini-fake';
import { fakeEmbedding as openaiVector, OpenAiFake } from './fakes/openai-fake';
import { PRO_KEY, startTestApp, TestApp } from './support/app';

/**
 * `POST /v1/embeddings` through the official `openai` SDK and raw HTTP, against fake
 * upstreams speaking OpenAI's and Gemini's wire formats.
 */
let t: TestApp;
let client: OpenAI;
const openai = new OpenAiFake({ variant: 'openai', apiKey: 'sk-openai-secret' });
const spare = new OpenAiFake({ variant: 'openai' });
const gemini = new GeminiFake();
const anthropic = new AnthropicFake();
const fakes = [openai, spare, gemini, anthropic];

const yamlFor = (extra = '') => `
providers:
  openai: { family: openai, base_url: "${openai.url}", api_key: "sk-openai-secret" }
  spare: { family: openai, base_url: "${spare.url}", api_key: "sk-spare" }
  gemini: { family: gemini, base_url: "${gemini.url}", api_key: "gm-secret" }
  anthropic: { family: anthropic, base_url: "${anthropic.url}", api_key: "sk-ant-secret" }
models:
  embed-small: { type: embedding, provider: openai, upstream: text-embedding-3-small, cost: { input_per_mtok: 0.02, output_per_mtok: 0 } }
  embed-ha:
    type: embedding
    providers: { openai: { upstream: te3-primary }, spare: { upstream: te3-backup } }
  gem-embed: { type: embedding, provider: gemini, upstream: gemini-embedding-001 }
  gpt: { provider: openai, upstream: gpt-4o-mini }
  claude: { provider: anthropic, upstream: claude-haiku-4-5 }
${extra}
organizations:
  acme:
    plan: pro
    api_keys: [ { id: acme-rw, key: "${PRO_KEY}" } ]
`;

beforeAll(async () => {
  await Promise.all(fakes.map((f) => f.start()));
  t = await startTestApp({ yaml: yamlFor() });
  client = new OpenAI({ apiKey: PRO_KEY, baseURL: `${t.url}/v1`, maxRetries: 0 });
});
afterEach(() => fakes.forEach((f) => f.reset()));
afterAll(async () => {
  await t.close();
  await Promise.all(fakes.map((f) => f.stop()));
});

const upstreamCalls = () => fakes.reduce((n, f) => n + f.requests.length, 0);
const tokens = (text: string) => Math.max(1, Math.ceil(text.length / 4));
const normalise = (v: number[]) => {
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
};

/** A response body as the untyped JSON the assertions look into. */
const jsonOf = (res: Response): Promise<any> => res.json();

function post(body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${t.url}/v1/embeddings`, {
    method: 'POST',
    headers: { authorization: `Bearer ${PRO_KEY}`, 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

describe('OpenAI-compatible upstream', () => {
  it('SDK default (base64): the fake vectors, the upstream asked for float, served headers and usage', async () => {
    const { data, response } = await client.embeddings.create({ model: 'embed-small', input: 'hello world' }).withResponse();
    expect(data.object).toBe('list');
    expect(data.model).toBe('embed-small');
    expect(data.data).toEqual([{ object: 'embedding', index: 0, embedding: openaiVector('hello world', 16) }]);
    expect(data.usage).toEqual({ prompt_tokens: tokens('hello world'), total_tokens: tokens('hello world') });
    expect(response.headers.get('gateway-provider')).toBe('openai');
    expect(response.headers.get('gateway-model')).toBe('embed-small');
    expect(response.headers.get('gateway-fallback-used')).toBe('false');
    expect(openai.requests).toHaveLength(1);
    const sent = openai.requests[0];
    expect(sent.path).toBe('/embeddings');
    expect(sent.body).toEqual({ model: 'text-embedding-3-small', input: ['hello world'], encoding_format: 'float' });
    expect(sent.headers.authorization).toBe('Bearer sk-openai-secret');
  });

  it('explicit float: the same vectors, as numbers', async () => {
    const b64 = await client.embeddings.create({ model: 'embed-small', input: 'same text' });
    const float = await client.embeddings.create({ model: 'embed-small', input: 'same text', encoding_format: 'float' });
    expect(Array.isArray(float.data[0].embedding)).toBe(true);
    expect(float.data[0].embedding).toEqual(openaiVector('same text', 16));
    expect(float.data[0].embedding).toEqual(b64.data[0].embedding);
  });

  it('raw base64: a string of little-endian float32 values, whatever the upstream sent', async () => {
    const res = await post({ model: 'embed-small', input: 'raw bytes', encoding_format: 'base64' });
    expect(res.status).toBe(200);
    const body = await jsonOf(res);
    expect(typeof body.data[0].embedding).toBe('string');
    const buf = Buffer.from(body.data[0].embedding, 'base64');
    expect(buf.length).toBe(16 * 4);
    const decoded = Array.from({ length: 16 }, (_, i) => buf.readFloatLE(i * 4));
    expect(decoded).toEqual(openaiVector('raw bytes', 16));
    expect(openai.requests[0].body.encoding_format).toBe('float');
  });

  it('a batch: one entry per input, in request order, index matching', async () => {
    const input = ['alpha', 'beta', 'gamma', 'delta', 'alpha'];
    for (const encoding_format of [undefined, 'float'] as const) {
      const r = await client.embeddings.create({ model: 'embed-small', input, ...(encoding_format ? { encoding_format } : {}) });
      expect(r.data.map((d) => d.index)).toEqual([0, 1, 2, 3, 4]);
      expect(r.data.map((d) => d.embedding)).toEqual(input.map((s) => openaiVector(s, 16)));
      expect(r.usage.prompt_tokens).toBe(input.reduce((n, s) => n + tokens(s), 0));
    }
    expect(openai.requests.map((q) => q.body.input)).toEqual([input, input]);
  });

  it('dimensions and user are forwarded', async () => {
    const r = await client.embeddings.create({ model: 'embed-small', input: ['a b c'], dimensions: 8, user: 'end-user-7' });
    expect(openai.requests[0].body).toMatchObject({ dimensions: 8, user: 'end-user-7' });
    expect(r.data[0].embedding).toHaveLength(8);
    expect(r.data[0].embedding).toEqual(openaiVector('a b c', 8));
  });

  it('provider/model picks that provider', async () => {
    const { data, response } = await client.embeddings.create({ model: 'spare/embed-ha', input: 'x' }).withResponse();
    expect(data.model).toBe('embed-ha');
    expect(response.headers.get('gateway-provider')).toBe('spare');
    expect(openai.requests).toHaveLength(0);
    expect(spare.requests[0].body.model).toBe('te3-backup');
  });
});

describe('Gemini upstream', () => {
  it('one input → embedContent with outputDimensionality; the truncated vector renormalised', async () => {
    const r = await client.embeddings.create({ model: 'gem-embed', input: 'single', dimensions: 8, encoding_format: 'float' });
    expect(gemini.requests).toHaveLength(1);
    expect(gemini.requests[0].path).toBe('/models/gemini-embedding-001:embedContent');
    expect(gemini.requests[0].body).toEqual({ content: { parts: [{ text: 'single' }] }, outputDimensionality: 8 });
    expect(gemini.requests[0].headers['x-goog-api-key']).toBe('gm-secret');
    expect(r.model).toBe('gem-embed');
    expect(r.data[0].embedding).toEqual(normalise(geminiVector('single', 8)));
  });

  it('a batch → one batchEmbedContents call, results in request order; SDK default base64 decodes to the same vectors', async () => {
    const input = ['first', 'second', 'third'];
    const { data, response } = await client.embeddings.create({ model: 'gem-embed', input, dimensions: 8 }).withResponse();
    expect(response.headers.get('gateway-provider')).toBe('gemini');
    expect(gemini.requests).toHaveLength(1);
    expect(gemini.requests[0].path).toBe('/models/gemini-embedding-001:batchEmbedContents');
    expect(gemini.requests[0].body).toEqual({
      requests: input.map((text) => ({ model: 'models/gemini-embedding-001', content: { parts: [{ text }] }, outputDimensionality: 8 })),
    });
    expect(data.data.map((d) => d.index)).toEqual([0, 1, 2]);
    expect(data.data.map((d) => d.embedding)).toEqual(input.map((s) => normalise(geminiVector(s, 8)).map(Math.fround)));
    expect(data.usage).toEqual({ prompt_tokens: input.reduce((n, s) => n + tokens(s), 0), total_tokens: input.reduce((n, s) => n + tokens(s), 0) });
  });
});

describe('fallback and upstream failures', () => {
  it('falls back from a failing provider (503) to the next one serving the same model', async () => {
    openai.next({ errorStatus: 503 });
    const { data, response } = await client.embeddings.create({ model: 'embed-ha', input: ['one', 'two'] }).withResponse();
    expect(response.headers.get('gateway-provider')).toBe('spare');
    expect(response.headers.get('gateway-model')).toBe('embed-ha');
    expect(response.headers.get('gateway-fallback-used')).toBe('true');
    expect(data.model).toBe('embed-ha');
    expect(data.data.map((d) => d.embedding)).toEqual([openaiVector('one', 16), openaiVector('two', 16)]);
    expect(openai.requests.map((r) => r.body.model)).toEqual(['te3-primary']);
    expect(spare.requests.map((r) => r.body.model)).toEqual(['te3-backup']);
  });

  it('every provider failing: 502 upstream_error in the chat error format, upstream bodies not copied', async () => {
    openai.next({ errorStatus: 500 });
    spare.next({ errorStatus: 503 });
    const res = await post({ model: 'embed-ha', input: 'x' });
    expect(res.status).toBe(502);
    const text = await res.text();
    expect(JSON.parse(text)).toEqual({ error: { type: 'error', code: 'upstream_error', message: 'The upstream providers failed (last upstream status 503).' } });
    expect(text).not.toContain('overloaded');
    expect(openai.requests).toHaveLength(1);
    expect(spare.requests).toHaveLength(1);
  });

  it('an upstream 4xx that is not a fallback trigger: 400 upstream_invalid_request, no fallback', async () => {
    openai.next({ errorStatus: 400 });
    const res = await post({ model: 'embed-ha', input: 'x' });
    expect(res.status).toBe(400);
    expect((await jsonOf(res)).error).toMatchObject({ type: 'error', code: 'upstream_invalid_request' });
    expect(spare.requests).toHaveLength(0);
  });

  it('the upstream rate-limiting (429) is a fallback trigger too', async () => {
    openai.next({ errorStatus: 429, retryAfter: 2 });
    const { response } = await client.embeddings.create({ model: 'embed-ha', input: 'x' }).withResponse();
    expect(response.headers.get('gateway-provider')).toBe('spare');
  });

  it('a missing gateway API key: 401 invalid_api_key in the standard format, nothing forwarded', async () => {
    const res = await fetch(`${t.url}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'embed-small', input: 'x' }) });
    expect(res.status).toBe(401);
    expect((await jsonOf(res)).error).toMatchObject({ type: 'error', code: 'invalid_api_key' });
    expect(upstreamCalls()).toBe(0);
  });
});

describe('model not supported (docs/api.md "Error body")', () => {
  const exact = (model: string, message: string) =>
    `{"error":{"message":${JSON.stringify(message)},"type":"invalid_request_error","code":"model_not_found","param":"model"}}`;

  it.each([
    ['an unknown model', 'no-such-model', 'The model "no-such-model" does not exist.'],
    ['a chat model', 'gpt', 'The model "gpt" is not an embedding model.'],
    ['a model only on Anthropic', 'claude', 'The model "claude" is not an embedding model.'],
    ['an embedding model on a provider that does not serve it', 'anthropic/embed-small', 'The model "anthropic/embed-small" does not exist.'],
  ])('%s: exactly the contract body, byte for byte, and no provider called', async (_name, model, message) => {
    const res = await post({ model, input: 'x' });
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await res.text()).toBe(exact(model, message));
    expect(upstreamCalls()).toBe(0);
  });

  it('the SDK sees a BadRequestError with code model_not_found and param model', async () => {
    const err = await client.embeddings.create({ model: 'claude', input: 'x' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err).toMatchObject({ status: 400, code: 'model_not_found', param: 'model', type: 'invalid_request_error' });
  });
});

describe('validation: 400 invalid_request with param, no provider called', () => {
  const ok = { model: 'embed-small', input: 'x' };
  it.each<[string, string, unknown]>([
    ['unknown key', 'stream', { ...ok, stream: true }],
    ['model missing', 'model', { input: 'x' }],
    ['model not a string', 'model', { ...ok, model: ['embed-small'] }],
    ['input missing', 'input', { model: 'embed-small' }],
    ['input a number', 'input', { ...ok, input: 3 }],
    ['input empty array', 'input', { ...ok, input: [] }],
    ['input entry not a string', 'input.1', { ...ok, input: ['a', { text: 'b' }] }],
    ['input entry empty', 'input.1', { ...ok, input: ['a', ''] }],
    ['input token ids', 'input.0', { ...ok, input: [1, 2, 3] }],
    ['too many inputs', 'input', { ...ok, input: Array.from({ length: MAX_INPUTS + 1 }, () => 'x') }],
    ['too much text', 'input', { ...ok, input: ['y'.repeat(600_000), 'z'.repeat(600_000)] }],
    ['dimensions zero', 'dimensions', { ...ok, dimensions: 0 }],
    ['dimensions fractional', 'dimensions', { ...ok, dimensions: 1.5 }],
    ['dimensions a string', 'dimensions', { ...ok, dimensions: '8' }],
    ['encoding_format unknown', 'encoding_format', { ...ok, encoding_format: 'int8' }],
    ['user not a string', 'user', { ...ok, user: 12 }],
    ['body an array', 'body', [ok]],
  ])('%s → param %s', async (_name, param, body) => {
    const res = await post(body);
    expect(res.status).toBe(400);
    const json = await jsonOf(res);
    expect(json.error).toMatchObject({ type: 'error', code: 'invalid_request', param });
    expect(upstreamCalls()).toBe(0);
  });

  it('malformed JSON → 400 invalid_request', async () => {
    const res = await post('{"model": "embed-small", "input": ');
    expect(res.status).toBe(400);
    expect((await jsonOf(res)).error.code).toBe('invalid_request');
  });

  it('a body over 4 MiB → 400 body_too_large', async () => {
    const res = await post({ ...ok, input: 'w'.repeat(4 * 1024 * 1024 + 1) });
    expect(res.status).toBe(400);
    expect((await jsonOf(res)).error.code).toBe('body_too_large');
    expect(upstreamCalls()).toBe(0);
  });

  it('a bad gateway-session-id → 400 invalid_request', async () => {
    const res = await post(ok, { 'gateway-session-id': 'bad id!' });
    expect(res.status).toBe(400);
    expect((await jsonOf(res)).error).toMatchObject({ code: 'invalid_request', param: 'gateway-session-id' });
    expect(upstreamCalls()).toBe(0);
  });
});

describe('decision traces', () => {
  const rowsOf = async (requestId: string) => {
    await t.app.get(DecisionTraceWriter).flush();
    return (await t.app.get(SqlStore).query<Record<string, unknown>>('SELECT * FROM decision_traces WHERE request_id = $1', [requestId])).rows;
  };

  it('one trace per request: endpoint embeddings, the served pair, fallback, tokens and cost, no input text', async () => {
    openai.next({ errorStatus: 503 });
    await client.embeddings.create(
      { model: 'embed-ha', input: ['EMBED-MARKER-9931 secret text'] },
      { headers: { 'x-request-id': 'req-embed-trace-1', 'gateway-session-id': 'sess-embed-1' } },
    );
    const rows = await rowsOf('req-embed-trace-1');
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      org_id: 'acme',
      api_key_id: 'acme-rw',
      session_id: 'sess-embed-1',
      endpoint: 'embeddings',
      requested_model: 'embed-ha',
      selected_provider: 'spare',
      selected_model: 'embed-ha',
      fallback_used: true,
      attempts: 2,
      // The first target's 503, for the learning loop's success rate (README "Feedback and the learning loop").
      failed_attempts: [{ provider: 'openai', model: 'embed-ha', error: 'status', status: 503 }],
      status: 200,
      prompt_tokens: tokens('EMBED-MARKER-9931 secret text'),
    });
    expect(JSON.stringify(rows[0])).not.toContain('EMBED-MARKER-9931');
  });

  it('cost from the model price; a failed request is traced with its error code', async () => {
    await client.embeddings.create({ model: 'embed-small', input: 'priced' }, { headers: { 'x-request-id': 'req-embed-trace-2' } });
    const [priced] = await rowsOf('req-embed-trace-2');
    expect(Number(priced.cost_usd)).toBeCloseTo((tokens('priced') * 0.02) / 1e6, 12);

    openai.next({ errorStatus: 500 });
    spare.next({ errorStatus: 500 });
    await post({ model: 'embed-ha', input: 'x' }, { 'x-request-id': 'req-embed-trace-3' });
    const [failed] = await rowsOf('req-embed-trace-3');
    expect(failed).toMatchObject({
      endpoint: 'embeddings',
      status: 502,
      error_code: 'upstream_error',
      selected_provider: null,
      failed_attempts: [
        { provider: 'openai', model: 'embed-ha', error: 'status', status: 500 },
        { provider: 'spare', model: 'embed-ha', error: 'status', status: 500 },
      ],
    });
  });
});

describe('per-key rate limit and start-up checks', () => {
  it('the per-key limit applies to embeddings: 429 rate_limited with Retry-After', async () => {
    const small = await startTestApp({ yaml: `${yamlFor()}\nlimits: { requests_per_minute_per_key: 2 }\n` });
    try {
      const call = () =>
        fetch(`${small.url}/v1/embeddings`, {
          method: 'POST',
          headers: { authorization: `Bearer ${PRO_KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'embed-small', input: 'x' }),
        });
      expect((await call()).status).toBe(200);
      expect((await call()).status).toBe(200);
      const denied = await call();
      expect(denied.status).toBe(429);
      expect(Number(denied.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect((await jsonOf(denied)).error).toMatchObject({ type: 'error', code: 'rate_limited' });
      expect(openai.requests).toHaveLength(2);
    } finally {
      await small.close();
    }
  });

  it('an embedding model configured on Anthropic stops start-up with a config error naming the field', async () => {
    const yaml = yamlFor('  embed-claude: { type: embedding, provider: anthropic, upstream: claude-embed }');
    await expect(startTestApp({ yaml })).rejects.toThrow(
      'models.embed-claude.provider: provider "anthropic" (family anthropic) has no embeddings API, so it cannot serve the embedding model "embed-claude"',
    );
  });
});
