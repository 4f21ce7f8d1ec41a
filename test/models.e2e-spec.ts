import OpenAI from 'openai';
import { PRO_KEY, READ_ONLY_KEY, startTestApp, TestApp, WRITE_ONLY_KEY } from './support/app';

/** `GET /v1/models` and `GET /v1/models/{id}` through HTTP, with the official `openai` SDK and raw fetch. */
const BETA_KEY = 'gw-test-beta-key';
const YAML = `
providers:
  mock: { family: mock }
  mock2: { family: mock }
models:
  mock-fast: { provider: mock, type: chat }
  duo: { providers: { mock2: {}, mock: {} }, type: chat }
  mock-embed: { provider: mock, type: embedding, dimensions: 8 }
  meta-llama/Llama-3-8B: { provider: mock2, upstream: mock-llama }
routes:
  - { name: default, orgs: ["*"], models: [auto, mock-fast], targets: [mock/mock-fast] }
  - { name: acme-route, orgs: [acme], models: [acme-smart, "*"], targets: [duo] }
  - { name: beta-route, orgs: [beta, other], models: [beta-cheap], targets: [mock/mock-fast] }
organizations:
  acme:
    plan: pro
    api_keys:
      - { id: acme-rw, key: "${PRO_KEY}", permissions: [read, write] }
      - { id: acme-ro, key: "${READ_ONLY_KEY}", permissions: [read] }
      - { id: acme-wo, key: "${WRITE_ONLY_KEY}", permissions: [write] }
  beta:
    plan: free
    api_keys: [ { id: beta-rw, key: "${BETA_KEY}" } ]
`;

let t: TestApp;
let acme: OpenAI;
let beta: OpenAI;
beforeAll(async () => {
  t = await startTestApp({ yaml: YAML });
  acme = new OpenAI({ apiKey: PRO_KEY, baseURL: `${t.url}/v1`, maxRetries: 0 });
  beta = new OpenAI({ apiKey: BETA_KEY, baseURL: `${t.url}/v1`, maxRetries: 0 });
});
afterAll(() => t.close());

async function get(path: string, key: string | null = PRO_KEY): Promise<{ status: number; json: any; type: string | null }> {
  const res = await fetch(t.url + path, { headers: key === null ? {} : { authorization: `Bearer ${key}` } });
  const text = await res.text();
  return { status: res.status, json: JSON.parse(text), type: res.headers.get('content-type') };
}

const model = (id: string, owned_by: string) => ({ id, object: 'model', created: 0, owned_by });
const notFound = (id: string) => ({ error: { type: 'error', code: 'model_not_found', message: `The model "${id}" does not exist or no route serves it.` } });

describe('GET /v1/models', () => {
  it('the SDK pages through the catalogue (chat and embedding) and the organisation\'s aliases, sorted by id', async () => {
    const seen = [];
    for await (const m of acme.models.list()) seen.push(m);
    expect(seen).toEqual([
      model('acme-smart', 'gateway'),
      model('auto', 'gateway'),
      model('duo', 'mock2'),
      model('meta-llama/Llama-3-8B', 'mock2'),
      model('mock-embed', 'mock'),
      model('mock-fast', 'mock'),
    ]);
  });

  it('answers OpenAI\'s exact list shape as JSON', async () => {
    const r = await get('/v1/models');
    expect(r.status).toBe(200);
    expect(r.type).toMatch(/^application\/json/);
    expect(Object.keys(r.json).sort()).toEqual(['data', 'object']);
    expect(r.json.object).toBe('list');
    for (const m of r.json.data) {
      expect(Object.keys(m).sort()).toEqual(['created', 'id', 'object', 'owned_by']);
      expect(Number.isInteger(m.created)).toBe(true);
    }
  });

  it('two organisations see different aliases, the same catalogue', async () => {
    const ids = async (client: OpenAI) => (await client.models.list()).data.map((m) => m.id);
    expect(await ids(beta)).toEqual(['auto', 'beta-cheap', 'duo', 'meta-llama/Llama-3-8B', 'mock-embed', 'mock-fast']);
    expect(await ids(acme)).not.toContain('beta-cheap');
    expect(await ids(acme)).not.toContain('*');
  });

  it('is the same answer on every call (created is fixed, the order stable)', async () => {
    const a = await get('/v1/models');
    const b = await get('/v1/models/');
    expect(b).toEqual(a);
  });

  it('401 invalid_api_key without a key or with a wrong one', async () => {
    for (const key of [null, 'gw-not-a-key']) {
      for (const path of ['/v1/models', '/v1/models/mock-fast', '/v1/models/nope']) {
        const r = await get(path, key);
        expect([path, r.status, r.json]).toEqual([path, 401, { error: { type: 'error', code: 'invalid_api_key', message: 'The API key is missing or invalid.' } }]);
      }
    }
    await expect(new OpenAI({ apiKey: 'gw-not-a-key', baseURL: `${t.url}/v1`, maxRetries: 0 }).models.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
  });

  it('any valid key may list and retrieve, as any valid key may chat: read-only and write-only keys included', async () => {
    for (const key of [READ_ONLY_KEY, WRITE_ONLY_KEY]) {
      const client = new OpenAI({ apiKey: key, baseURL: `${t.url}/v1`, maxRetries: 0 });
      const chat = await client.chat.completions.create({ model: 'auto', messages: [{ role: 'user', content: 'hi' }] });
      expect(chat.model).toBe('mock-fast');
      expect((await client.models.list()).data).toHaveLength(6);
      expect(await client.models.retrieve('auto')).toEqual(model('auto', 'gateway'));
    }
  });
});

describe('GET /v1/models/{id}', () => {
  it('the SDK retrieves a catalogue model, an embedding model and an alias', async () => {
    expect(await acme.models.retrieve('duo')).toEqual(model('duo', 'mock2'));
    expect(await acme.models.retrieve('mock-embed')).toEqual(model('mock-embed', 'mock'));
    expect(await acme.models.retrieve('acme-smart')).toEqual(model('acme-smart', 'gateway'));
    expect(await beta.models.retrieve('beta-cheap')).toEqual(model('beta-cheap', 'gateway'));
  });

  it('a trailing slash is ignored, as on every route; the query string too', async () => {
    expect((await get('/v1/models/auto/')).json).toEqual(model('auto', 'gateway'));
    expect((await get('/v1/models/mock/duo/')).json).toEqual(model('mock/duo', 'mock'));
    expect((await get('/v1/models/auto?x=1')).json).toEqual(model('auto', 'gateway'));
  });

  it('an alias shared with a catalogue id answers as the catalogue model', async () => {
    expect(await acme.models.retrieve('mock-fast')).toEqual(model('mock-fast', 'mock'));
  });

  it('a slash in the id: the SDK\'s %2F and a raw path reach the same model; provider/model pairs are looked up', async () => {
    expect(await acme.models.retrieve('meta-llama/Llama-3-8B')).toEqual(model('meta-llama/Llama-3-8B', 'mock2'));
    expect((await get('/v1/models/meta-llama/Llama-3-8B')).json).toEqual(model('meta-llama/Llama-3-8B', 'mock2'));
    expect(await acme.models.retrieve('mock/duo')).toEqual(model('mock/duo', 'mock'));
    const raw = await get('/v1/models/mock2/duo');
    expect([raw.status, raw.json]).toEqual([200, model('mock2/duo', 'mock2')]);
    const pairOfSlashId = await get('/v1/models/mock2/meta-llama/Llama-3-8B');
    expect([pairOfSlashId.status, pairOfSlashId.json]).toEqual([200, model('mock2/meta-llama/Llama-3-8B', 'mock2')]);
  });

  it('404 model_not_found naming the id, which the SDK raises as NotFoundError', async () => {
    const err = await acme.models.retrieve('no-such-model').then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect((err as InstanceType<typeof OpenAI.NotFoundError>).error).toEqual(notFound('no-such-model').error);
  });

  it('404 for another organisation\'s alias, the wildcard, a pair its provider does not serve and a comma list', async () => {
    const cases: Array<[string, string, string]> = [
      [BETA_KEY, '/v1/models/acme-smart', 'acme-smart'],
      [PRO_KEY, '/v1/models/beta-cheap', 'beta-cheap'],
      [PRO_KEY, '/v1/models/*', '*'],
      [PRO_KEY, '/v1/models/taken-by-the-wildcard-route', 'taken-by-the-wildcard-route'],
      [PRO_KEY, '/v1/models/mock2/mock-fast', 'mock2/mock-fast'],
      [PRO_KEY, '/v1/models/nobody/mock-fast', 'nobody/mock-fast'],
      [PRO_KEY, '/v1/models/mock-fast,duo', 'mock-fast,duo'],
    ];
    for (const [key, path, id] of cases) {
      const r = await get(path, key);
      expect([path, r.status, r.type?.startsWith('application/json'), r.json]).toEqual([path, 404, true, notFound(id)]);
    }
  });

  it('a malformed percent-encoding is 400 invalid_request, as on every route; other methods are unknown endpoints', async () => {
    const bad = await get('/v1/models/%E0%A4%A');
    expect([bad.status, bad.json.error.code]).toEqual([400, 'invalid_request']);
    for (const [method, path] of [['DELETE', '/v1/models/mock-fast'], ['POST', '/v1/models']]) {
      const res = await fetch(t.url + path, { method, headers: { authorization: `Bearer ${PRO_KEY}` } });
      expect([method, res.status, await res.json()]).toEqual([method, 404, { error: { type: 'error', code: 'not_found', message: 'No such endpoint.' } }]);
    }
  });

  it('Object.prototype names are unknown models in the error body, never a 500', async () => {
    for (const id of ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', 'prototype']) {
      for (const path of [`/v1/models/${id}`, `/v1/models/mock/${id}`, `/v1/models/${id}/mock-fast`]) {
        const r = await get(path);
        const asked = path.slice('/v1/models/'.length);
        expect([path, r.status, r.json]).toEqual([path, 404, notFound(asked)]);
      }
      await expect(acme.models.retrieve(id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    }
  });
});
