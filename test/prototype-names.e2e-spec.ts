/**
 * Any string is safe as a key: every name Object.prototype carries (plus `__proto__` and
 * `prototype`) sent in every string field of every endpoint's body, in the query string, in every
 * header the gateway reads, and used as an id in the config file. Each answer must be the documented
 * 4xx with the error envelope, or a 2xx where the value is legitimately valid; never a 5xx, and a
 * request refused with a 4xx never reaches the upstream.
 */
import { ConfigError } from '../src/config/schema';
import { loadGatewayConfig } from '../src/config/gateway-config';
import { GeminiFake } from './fakes/gemini-fake';
import { OpenAiFake } from './fakes/openai-fake';
import { PRO_KEY, startTestApp, TestApp } from './support/app';
import { Endpoint, replyProblems, RequestSpec, send } from './support/http-check';

const NAMES = [...new Set([...Object.getOwnPropertyNames(Object.prototype), '__proto__', 'prototype'])].sort();
/** Names the config's id pattern takes (a letter first); the `__x__` ones must be refused with a path. */
const ID_NAMES = NAMES.filter((n) => /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/.test(n));
/** Keys the JSON body reader refuses anywhere in a body (README "Errors"). */
const REFUSED_BODY_KEYS = new Set(['__proto__', 'constructor']);
const FEATURES = '[has_test_ab, feedback_routing, explain]';
const UNLIMITED = 'limits: { requests_per_minute_per_key: 1000000, experiment_creates_per_hour: 1000000, explain_per_minute_per_org: 1000000, explain_per_minute_per_key: 1000000 }';

const upstream = new OpenAiFake({ variant: 'openai' });
const gemini = new GeminiFake();

const yaml = (fakeUrl: string, geminiUrl: string) => `
providers:
  fake: { family: openai, base_url: "${fakeUrl}", api_key: "sk-fake" }
  gem: { family: gemini, base_url: "${geminiUrl}", api_key: "gm-fake" }
  mock: { family: mock }
models:
  flash: { provider: gem, upstream: gemini-2.0-flash, type: chat }
  f-chat: { provider: fake, upstream: f-upstream, type: chat }
  f-embed: { provider: fake, upstream: f-embed-upstream, type: embedding }
  mock-fast: { provider: mock, type: chat }
routes:
  - { name: default, models: [auto], strategy: ordered, targets: [fake/f-chat] }
  - { name: support, models: [support], strategy: ordered, targets: [fake/f-chat], template: support }
templates:
  support: { system: "You help {{customer}}." }
${UNLIMITED}
organizations:
  acme:
    plan: pro
    features: ${FEATURES}
    api_keys: [ { id: acme-rw, key: "${PRO_KEY}", permissions: [read, write] } ]
`;

const json = (extra: Record<string, string> = {}) => ({ authorization: `Bearer ${PRO_KEY}`, 'content-type': 'application/json', ...extra });
const confirmed = (extra: Record<string, string> = {}) => json({ 'x-gateway-confirm': 'experiments', ...extra });
const msgs = (content: unknown = 'hi') => [{ role: 'user', content }];
const chatBody = (over: Record<string, unknown> = {}) => ({ model: 'auto', messages: msgs(), ...over });
const expBody = (over: Record<string, unknown> = {}) => ({
  type: 'canary',
  baseline: { provider: 'fake', model: 'f-chat' },
  candidate: { provider: 'mock', model: 'mock-fast' },
  traffic_pct: 10,
  ...over,
});

/** Model strings a client could build around a name: bare, as a provider or model half, inside a comma list. */
const modelForms = (n: string, provider: string, model: string) => [n, `${provider}/${n}`, `${n}/${model}`, `${n}/${n}`, `${model},${n}`, `${n},${model}`, `${n}, ${n}`];

interface Case {
  label: string;
  endpoint: Endpoint;
  req: RequestSpec;
  stream?: boolean;
}

/** Every place of every request where a client-chosen string goes, filled with `n`. */
function casesFor(n: string): Case[] {
  const out: Case[] = [];
  const chat = (label: string, body: unknown, headers = json(), path = '/v1/chat/completions') => {
    out.push({ label: `chat ${label}`, endpoint: 'chat', req: { method: 'POST', path, headers, body } });
    if (body && typeof body === 'object' && !Array.isArray(body)) {
      out.push({ label: `chat stream ${label}`, endpoint: 'chat', stream: true, req: { method: 'POST', path, headers, body: { ...body, stream: true } } });
    }
    out.push({ label: `explain ${label}`, endpoint: 'explain', req: { method: 'POST', path: '/v1/routing/explain', headers, body: { request: body } } });
  };
  for (const m of modelForms(n, 'fake', 'f-chat')) chat(`model=${m}`, chatBody({ model: m }));
  chat('messages.0.role', chatBody({ messages: [{ role: n, content: 'hi' }] }));
  chat('messages.0.content', chatBody({ messages: msgs(n) }));
  chat('messages.0.name', chatBody({ messages: [{ role: 'user', content: 'hi', name: n }] }));
  chat('messages.0.<key>', chatBody({ messages: [{ role: 'user', content: 'hi', [n]: 'x' }] }));
  chat('content part type', chatBody({ messages: msgs([{ type: n, text: 'hi' }]) }));
  chat('content part text', chatBody({ messages: msgs([{ type: 'text', text: n }]) }));
  chat('content part <key>', chatBody({ messages: msgs([{ type: 'text', text: 'hi', [n]: 1 }]) }));
  chat('image_url.url', chatBody({ messages: msgs([{ type: 'image_url', image_url: { url: n } }]) }));
  chat('image_url.detail', chatBody({ messages: msgs([{ type: 'image_url', image_url: { url: 'https://x.test/a.png', detail: n } }]) }));
  chat('tool_calls', chatBody({ messages: [...msgs(), { role: 'assistant', content: null, tool_calls: [{ id: n, type: 'function', function: { name: n, arguments: n } }] }, { role: 'tool', tool_call_id: n, content: n }] }));
  chat('tools.0.type', chatBody({ tools: [{ type: n, function: { name: 'f' } }] }));
  chat('tools.0.function.name', chatBody({ tools: [{ type: 'function', function: { name: n, description: n, parameters: { type: 'object', properties: { [n]: { type: 'string' } } } } }] }));
  chat('tool_choice', chatBody({ tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: n }));
  chat('tool_choice.function.name', chatBody({ tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: { type: 'function', function: { name: n } } }));
  chat('response_format.type', chatBody({ response_format: { type: n } }));
  chat('reasoning_effort', chatBody({ reasoning_effort: n }));
  chat('stop', chatBody({ stop: n }));
  chat('stop.0', chatBody({ stop: [n] }));
  chat('user', chatBody({ user: n }));
  chat('temperature (a string)', chatBody({ temperature: n }));
  chat('stream_options.<key>', chatBody({ stream: true, stream_options: { [n]: true } }));
  chat('metadata.<key>', chatBody({ metadata: { [n]: n } }));
  chat('<top-level key>', chatBody({ [n]: n }));
  chat('inputs.<key>', chatBody({ inputs: { [n]: n } }));
  chat('inputs.<key> on a template route', chatBody({ model: 'support', inputs: { customer: 'c', [n]: n } }));
  chat('template placeholder naming it', chatBody({ model: 'support', inputs: { customer: n }, messages: msgs(`{{${n}}}`) }));
  chat('body is the name', n);
  // JSON Schemas are the client's too: the name as a type, a format, a property and a required entry,
  // on each schema path (passed through to OpenAI, converted for Gemini, instantiated by the mock).
  const schema = { type: 'object', properties: { a: { type: 'string', format: n }, [n]: { type: n, format: n } }, required: ['a', n], allOf: [{ [n]: 1, properties: { b: { type: n } } }] };
  for (const model of ['auto', 'flash', 'mock-fast']) {
    chat(`${model} response_format json_schema`, chatBody({ model, response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } }));
    chat(`${model} response_format json_schema type`, chatBody({ model, response_format: { type: 'json_schema', json_schema: { name: n, schema: { type: n, format: n } } } }));
    chat(`${model} tool parameters`, chatBody({ model, tools: [{ type: 'function', function: { name: 'f', parameters: schema } }] }));
  }

  // Headers the gateway reads, on chat (and explain's own `headers` map).
  chat('gateway-session-id header', chatBody(), json({ 'gateway-session-id': n }));
  chat('x-request-id header', chatBody(), json({ 'x-request-id': n }));
  chat('authorization header (bearer)', chatBody(), json({ authorization: `Bearer ${n}` }));
  chat('authorization header (scheme)', chatBody(), json({ authorization: n }));
  chat('content-type header', chatBody(), json({ 'content-type': n }));
  chat('accept-language header', chatBody(), json({ 'accept-language': n }));
  chat('query string key', chatBody(), json(), `/v1/chat/completions?${encodeURIComponent(n)}=1`);
  chat('query string value', chatBody(), json(), `/v1/chat/completions?model=${encodeURIComponent(n)}`);
  const explain = (label: string, body: unknown, headers = json()) =>
    out.push({ label: `explain ${label}`, endpoint: 'explain', req: { method: 'POST', path: '/v1/routing/explain', headers, body } });
  explain('headers.<key>', { request: chatBody(), headers: { [n]: n } });
  explain('headers.gateway-session-id', { request: chatBody(), headers: { 'gateway-session-id': n } });
  explain('<top-level key>', { request: chatBody(), [n]: {} });
  explain('request is the name', { request: n });
  explain('headers is the name', { request: chatBody(), headers: n });

  const emb = (label: string, body: unknown, headers = json()) =>
    out.push({ label: `embeddings ${label}`, endpoint: 'embeddings', req: { method: 'POST', path: '/v1/embeddings', headers, body } });
  for (const m of modelForms(n, 'fake', 'f-embed')) emb(`model=${m}`, { model: m, input: 'x' });
  emb('input', { model: 'f-embed', input: n });
  emb('input.0', { model: 'f-embed', input: [n, n] });
  emb('encoding_format', { model: 'f-embed', input: 'x', encoding_format: n });
  emb('dimensions (a string)', { model: 'f-embed', input: 'x', dimensions: n });
  emb('user', { model: 'f-embed', input: 'x', user: n });
  emb('<top-level key>', { model: 'f-embed', input: 'x', [n]: n });
  emb('gateway-session-id header', { model: 'f-embed', input: 'x' }, json({ 'gateway-session-id': n }));
  emb('content-type header', { model: 'f-embed', input: 'x' }, json({ 'content-type': n }));

  const fb = (label: string, body: unknown, headers = json()) =>
    out.push({ label: `feedback ${label}`, endpoint: 'feedback', req: { method: 'POST', path: '/v1/feedback', headers, body } });
  fb('session_id', { session_id: n, score: 7, useful: true });
  fb('score (a string)', { session_id: 's1', score: n, useful: true });
  fb('useful (a string)', { session_id: 's1', score: 7, useful: n });
  fb('<top-level key>', { session_id: 's1', score: 7, useful: true, [n]: n });
  fb('authorization header', { session_id: 's1', score: 7, useful: true }, json({ authorization: `Bearer ${n}` }));

  const create = (label: string, body: unknown, headers = confirmed()) =>
    out.push({ label: `experiments create ${label}`, endpoint: 'experiments-create', req: { method: 'POST', path: '/v1/experiments', headers, body } });
  create('type', expBody({ type: n }));
  create('baseline.provider', expBody({ baseline: { provider: n, model: 'f-chat' } }));
  create('baseline.model', expBody({ baseline: { provider: 'fake', model: n } }));
  create('candidate.provider', expBody({ candidate: { provider: n, model: 'mock-fast' } }));
  create('candidate.model', expBody({ candidate: { provider: 'mock', model: n } }));
  create('candidate.<key>', expBody({ candidate: { provider: 'mock', model: 'mock-fast', [n]: n } }));
  create('traffic_pct (a string)', expBody({ traffic_pct: n }));
  create('stop_rule.<key>', expBody({ stop_rule: { [n]: 1 } }));
  create('stop_rule.max_regression (a string)', expBody({ stop_rule: { max_regression: n } }));
  create('<top-level key>', expBody({ [n]: n }));
  create('x-gateway-confirm header', expBody(), json({ 'x-gateway-confirm': n }));
  const rollback = (label: string, path: string, headers = confirmed()) =>
    out.push({ label: `experiments rollback ${label}`, endpoint: 'experiments-rollback', req: { method: 'POST', path, headers } });
  rollback('id', `/v1/experiments/${encodeURIComponent(n)}/rollback`);
  rollback('x-gateway-confirm header', `/v1/experiments/${encodeURIComponent(n)}/rollback`, json({ 'x-gateway-confirm': n }));
  out.push({ label: 'experiments list query', endpoint: 'experiments-list', req: { method: 'GET', path: `/v1/experiments?${encodeURIComponent(n)}=${encodeURIComponent(n)}`, headers: json() } });
  out.push({ label: 'experiments list id path', endpoint: 'experiments-list', req: { method: 'GET', path: `/v1/experiments/${encodeURIComponent(n)}`, headers: json() } });
  out.push({ label: 'health path', endpoint: 'health', req: { method: 'GET', path: `/health/${encodeURIComponent(n)}` } });
  out.push({ label: 'health query', endpoint: 'health', req: { method: 'GET', path: `/health/providers?${encodeURIComponent(n)}=1`, headers: { 'x-request-id': n } } });
  out.push({ label: 'metrics query', endpoint: 'metrics', req: { method: 'GET', path: `/metrics?${encodeURIComponent(n)}=1` } });
  return out;
}

/** Runs the cases one at a time (so an upstream call is pinned to its request) and returns every problem. */
async function runCases(base: string, cases: Case[]): Promise<string[]> {
  const problems: string[] = [];
  for (const c of cases) {
    const before = upstream.requests.length;
    const r = await send(base, c.req);
    const called = upstream.requests.length - before;
    for (const p of replyProblems(c.endpoint, r, { stream: c.stream })) problems.push(`${c.label}: ${p}`);
    if (r.status >= 400 && r.status < 500 && called > 0 && r.json?.error?.code !== 'upstream_invalid_request') {
      problems.push(`${c.label}: ${r.status} ${r.json?.error?.code} after ${called} upstream call(s)`);
    }
  }
  return problems;
}

describe('prototype names in requests', () => {
  let t: TestApp;
  beforeAll(async () => {
    await upstream.start();
    await gemini.start();
    t = await startTestApp({ yaml: yaml(upstream.url, gemini.url) });
  });
  afterAll(async () => {
    await t?.close();
    await upstream.stop();
    await gemini.stop();
  });

  it.each(NAMES)('%s in every field, header and query string: a 4xx with the envelope or a 2xx, never a 5xx', async (n) => {
    const prototypeBefore = Object.getOwnPropertyNames(Object.prototype).sort();
    const problems = await runCases(t.url, casesFor(n));
    expect(problems).toEqual([]);
    expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(prototypeBefore);
  });

  it('the name is a model a client may ask for only when the catalogue has it: model_not_found, not a crash', async () => {
    for (const n of NAMES) {
      for (const path of ['/v1/chat/completions', '/v1/embeddings']) {
        const body = path.endsWith('embeddings') ? { model: n, input: 'x' } : chatBody({ model: n });
        const r = await send(t.url, { method: 'POST', path, headers: json(), body });
        // Chat's unknown model is 404; embeddings keep the contract's own 400 body.
        const status = path.endsWith('embeddings') ? 400 : 404;
        expect(`${n} ${path} ${r.status} ${r.json?.error?.code}`).toBe(`${n} ${path} ${status} model_not_found`);
      }
      const r = await send(t.url, { method: 'POST', path: '/v1/routing/explain', headers: json(), body: { request: chatBody({ model: `mock-fast,${n}` }) } });
      expect(`${n} ${r.status} ${r.json?.error?.code}`).toBe(`${n} 404 no_route`);
    }
  });

  it('valid values that happen to be prototype names are served (session ids, feedback, message text)', async () => {
    for (const n of NAMES) {
      const chat = await send(t.url, { method: 'POST', path: '/v1/chat/completions', headers: json({ 'gateway-session-id': n }), body: chatBody({ messages: msgs(n), user: n, metadata: REFUSED_BODY_KEYS.has(n) ? {} : { [n]: 1 } }) });
      expect(`${n} ${chat.status}`).toBe(`${n} 200`);
      const fb = await send(t.url, { method: 'POST', path: '/v1/feedback', headers: json(), body: { session_id: n, score: 9, useful: true } });
      expect(`${n} ${fb.status}`).toBe(`${n} 200`);
    }
  });
});

/** A config file that names providers, models, orgs, templates, routes, aliases, inputs and headers after the prototype. */
function prototypeYaml(): string {
  const lines = ['providers:', '  mock: { family: mock }'];
  for (const n of ID_NAMES) lines.push(`  ${n}: { family: mock, headers: { ${JSON.stringify(n)}: ${JSON.stringify(n)} } }`);
  lines.push('models:');
  for (const n of NAMES) {
    const providers = ID_NAMES.includes(n) ? `{ mock: { upstream: "mock-${n}" }, ${n}: { upstream: "mock-${n}" } }` : `{ mock: { upstream: "mock-${n}" } }`;
    lines.push(`  ${JSON.stringify(n)}: { type: chat, providers: ${providers} }`);
    lines.push(`  ${JSON.stringify(`emb-${n}`)}: { type: embedding, provider: mock }`);
  }
  lines.push('templates:');
  for (const n of ID_NAMES) lines.push(`  ${n}: { system: "Hello {{${n}}}" }`);
  lines.push('routes:');
  for (const n of ID_NAMES) {
    lines.push(`  - { name: ${n}, orgs: [${n}], models: [${JSON.stringify(`alias-${n}`)}], targets: [${JSON.stringify(`${n}/${n}`)}], template: ${n} }`);
  }
  for (const n of NAMES) lines.push(`  - { name: ${JSON.stringify(`route-${n}`.replace(/^route-_+/, 'route-u'))}, models: [${JSON.stringify(n)}], targets: [${JSON.stringify(`mock/${n}`)}] }`);
  lines.push(UNLIMITED, 'organizations:');
  for (const n of ID_NAMES) lines.push(`  ${n}: { plan: pro, features: ${FEATURES}, api_keys: [ { id: ${n}, key: "gw-org-${n}" } ] }`);
  return lines.join('\n');
}

describe('prototype names in the config file', () => {
  const env = {};

  it('a map keyed by `__x__` names is refused with the path of the bad id; nothing is polluted', () => {
    const before = Object.getOwnPropertyNames(Object.prototype).sort();
    for (const n of NAMES.filter((x) => !ID_NAMES.includes(x))) {
      const q = JSON.stringify(n);
      const cases: Array<[string, string]> = [
        [`providers: { ${q}: { family: mock } }`, `providers.${n}`],
        [`organizations: { ${q}: { plan: pro } }`, `organizations.${n}`],
        [`templates: { ${q}: { system: "x" } }`, `templates.${n}`],
        [`providers: { mock: { family: mock } }\nmodels: { m: { provider: ${q} } }`, 'models.m.provider'],
        [`providers: { mock: { family: mock } }\nmodels: { m: { provider: mock } }\nroutes: [ { name: ${q}, models: [x], targets: [m] } ]`, 'routes.0.name'],
        [`providers: { mock: { family: mock } }\nmodels: { m: { provider: mock } }\nroutes: [ { name: r, models: [x], targets: [m], template: ${q} } ]`, 'routes.0.template'],
        [`providers: { mock: { family: mock } }\nmodels: { m: { providers: { ${q}: {} } } }`, `models.m.providers.${n}`],
        [`${q}: {}`, n],
        [`limits: { ${q}: 1 }`, `limits.${n}`],
        [`providers: { mock: { family: mock, ${q}: 1 } }`, `providers.mock.${n}`],
      ];
      for (const [text, path] of cases) {
        let err: unknown;
        try {
          loadGatewayConfig(text, env);
        } catch (e) {
          err = e;
        }
        expect(err).toBeInstanceOf(ConfigError);
        expect(`${n}: ${(err as ConfigError).path}`).toBe(`${n}: ${path}`);
      }
    }
    // Names the id pattern takes, in places where an unknown key or an unknown reference is the error.
    for (const n of NAMES) {
      const q = JSON.stringify(n);
      const refused: Array<[string, string]> = [
        [`providers: { mock: { family: mock } }\nmodels: { m: { provider: mock } }\nroutes: [ { name: r, models: [x], targets: [${q}] } ]`, 'routes.0.targets.0'],
        [`providers: { mock: { family: mock } }\nmodels: { m: { provider: mock } }\nroutes: [ { name: r, models: [x], targets: ["mock/${n}"] } ]`, 'routes.0.targets.0'],
        [`providers: { mock: { family: mock } }\nmodels: { m: { provider: mock } }\nroutes: [ { name: r, models: [x], targets: ["${n}/m"] } ]`, 'routes.0.targets.0'],
        [`providers: { mock: { family: mock } }\nmodels: { m: { provider: mock } }\nroutes: [ { name: r, models: [x], targets: [m] } ]\nfirewall: { rules: [ { id: f, pattern: a, action: block, routes: [${q}] } ] }`, 'firewall.rules.0.routes.0'],
        [`providers: { mock: { family: mock } }\nmodels: { m: { provider: mock, ${q}: 1 } }`, `models.m.${n}`],
        [`organizations: { o: { plan: pro, ${q}: 1 } }`, `organizations.o.${n}`],
      ];
      if (ID_NAMES.includes(n)) {
        refused.push([`providers: { mock: { family: mock } }\nmodels: { m: { provider: ${q} } }`, 'models.m.provider']);
        refused.push([`providers: { mock: { family: mock } }\nmodels: { m: { provider: mock } }\nroutes: [ { name: r, models: [x], targets: [m], template: ${q} } ]`, 'routes.0.template']);
      }
      for (const [text, path] of refused) {
        let err: unknown;
        try {
          loadGatewayConfig(text, env);
        } catch (e) {
          err = e;
        }
        expect(err).toBeInstanceOf(ConfigError);
        expect(`${n}: ${(err as ConfigError).path}`).toBe(`${n}: ${path}`);
      }
    }
    expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(before);
  });

  it('a file naming every id after the prototype loads, and its maps hold exactly what the file says', () => {
    const before = Object.getOwnPropertyNames(Object.prototype).sort();
    const cfg = loadGatewayConfig(prototypeYaml(), env);
    expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(before);
    expect(Object.keys(cfg.models).sort()).toEqual([...NAMES, ...NAMES.map((n) => `emb-${n}`)].sort());
    expect(Object.keys(cfg.providers).sort()).toEqual(['mock', ...ID_NAMES].sort());
    expect(Object.keys(cfg.organizations).sort()).toEqual([...ID_NAMES].sort());
    expect(Object.keys(cfg.templates).sort()).toEqual([...ID_NAMES].sort());
    for (const n of NAMES) {
      expect(cfg.models[n].id).toBe(n);
      expect(cfg.models[n].targets[0]).toMatchObject({ provider: 'mock', upstream: `mock-${n}` });
    }
    for (const n of ID_NAMES) {
      expect(cfg.providers[n].headers).toEqual({ [n]: n });
      expect(cfg.organizations[n].api_keys[0].id).toBe(n);
    }
  });

  describe('served through HTTP', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await startTestApp({ yaml: prototypeYaml() });
    });
    afterAll(() => t?.close());

    it.each(NAMES)('model, provider, route alias, org, template and input named %s work', async (n) => {
      const problems: string[] = [];
      const expectOk = async (label: string, key: string, path: string, body: unknown, endpoint: Endpoint, servedBy?: string) => {
        const r = await send(t.url, { method: 'POST', path, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body });
        if (r.status !== 200) problems.push(`${label}: ${r.status} ${r.text.slice(0, 200)}`);
        else problems.push(...replyProblems(endpoint, r).map((p) => `${label}: ${p}`));
        if (r.status === 200 && servedBy && r.headers.get('gateway-provider') !== servedBy) problems.push(`${label}: served by ${r.headers.get('gateway-provider')}`);
      };
      const key = ID_NAMES.includes(n) ? `gw-org-${n}` : `gw-org-${ID_NAMES[0]}`;
      // The name as a route alias (the route wins over the catalogue id), as provider/model, and in a comma list.
      await expectOk('route alias', key, '/v1/chat/completions', chatBody({ model: n }), 'chat', 'mock');
      await expectOk('mock/<name>', key, '/v1/chat/completions', chatBody({ model: `mock/${n}` }), 'chat', 'mock');
      await expectOk('comma list', key, '/v1/chat/completions', chatBody({ model: `${n},mock/${n}` }), 'chat', 'mock');
      await expectOk('embeddings', key, '/v1/embeddings', { model: `emb-${n}`, input: 'x' }, 'embeddings', 'mock');
      await expectOk('explain', key, '/v1/routing/explain', { request: chatBody({ model: `mock/${n}` }) }, 'explain');
      if (ID_NAMES.includes(n)) {
        // The org's own route: named after the org, its template and its provider, with an input of that name
        // (a body key `constructor` is refused by the JSON body reader, so that one input cannot be given).
        const route = chatBody({ model: `alias-${n}`, inputs: { [n]: 'v' } });
        if (REFUSED_BODY_KEYS.has(n)) {
          const r = await send(t.url, { method: 'POST', path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: route });
          expect(`${n} ${r.status} ${r.json?.error?.code}`).toBe(`${n} 400 invalid_request`);
        } else {
          await expectOk('org route + template + provider', key, '/v1/chat/completions', route, 'chat', n);
        }
        await expectOk('provider/model pair', key, '/v1/chat/completions', chatBody({ model: `${n}/${n}` }), 'chat', n);
        const missing = await send(t.url, { method: 'POST', path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: chatBody({ model: `alias-${n}`, inputs: {} }) });
        expect(`${n} ${missing.status} ${missing.json?.error?.code} ${missing.json?.error?.param}`).toBe(`${n} 400 missing_template_input inputs.${n}`);
        const r = await send(t.url, { method: 'POST', path: '/v1/experiments', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-gateway-confirm': 'experiments' }, body: { type: 'canary', baseline: { provider: n, model: n }, candidate: { provider: 'mock', model: n }, traffic_pct: 5 } });
        expect(`${n} ${r.status}`).toBe(`${n} 201`);
      }
      expect(problems).toEqual([]);
    });

    it('/health/providers lists the providers named after the prototype', async () => {
      const r = await send(t.url, { method: 'GET', path: '/health/providers' });
      expect(r.status).toBe(200);
      expect(r.json.providers.map((p: { id: string }) => p.id).sort()).toEqual(['mock', ...ID_NAMES].sort());
    });
  });
});
