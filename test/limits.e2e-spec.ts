/**
 * Per-key and per-organisation controls through HTTP (README "Limits"; docs/api.md "Check order",
 * "Errors", "Admin API" limits): requests and tokens per minute, monthly spend budgets, model
 * allow-lists and key expiry on chat, Responses, embeddings and feedback; the Admin API that
 * changes them, with its audit rows; exactness under 1,000 requests at once. On PGlite with the
 * in-process cache, and on real Postgres and Redis.
 */
import { SqlStore } from '../src/stores/sql/sql-store';
import { TenancyRepository } from '../src/tenancy/tenancy.repository';
import { TenancyService } from '../src/tenancy/tenancy.service';
import { OpenAiFake } from './fakes/openai-fake';
import { auth, describeEachStore, http } from './support/admin';
import { startTestApp, TestApp } from './support/app';
import { readReply, Reply } from './support/http-check';

// Redis outlives a run (windows for a minute, budgets for a month): each run has its own organisations.
const run = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
const ORG = `lim-${run}`;
const ORG2 = `lim2-${run}`;
const OTHER = `other-${run}`;
const K = {
  rpm: `gw-rpm-${run}`,
  tpm: `gw-tpm-${run}`,
  stream: `gw-stream-${run}`,
  budget: `gw-budget-${run}`,
  listed: `gw-listed-${run}`,
  expired: `gw-expired-${run}`,
  admin: `gw-admin-${run}`,
  plain: `gw-plain-${run}`,
  o2a: `gw-o2a-${run}`,
  o2b: `gw-o2b-${run}`,
  other: `gw-other-admin-${run}`,
};

const flaky = new OpenAiFake({ variant: 'openai' });
const yaml = () => `
providers:
  mock: { family: mock }
  flaky: { family: openai, base_url: "${flaky.url}", api_key: "sk-x" }
models:
  m: { provider: mock, upstream: mock-m }
  # One prompt token costs 1 USD, answers are free: a one-word message costs exactly 1 USD.
  priced: { provider: mock, upstream: mock-p, cost: { input_per_mtok: 1000000, output_per_mtok: 0 } }
  f: { provider: flaky, upstream: flaky-model }
  emb: { provider: mock, type: embedding, dimensions: 8, cost: { input_per_mtok: 1000000, output_per_mtok: 0 } }
routes:
  - { name: default, models: [auto], targets: [mock/m] }
# 1,000 requests at once on a small shared machine must not look like a store outage (the store
# breaker would then hand the limits to their fallbacks): outages have their own suite below.
stores: { cache_command_timeout_ms: 10000, analytics_request_timeout_ms: 10000 }
organizations:
  ${ORG}:
    plan: pro
    api_keys:
      - { id: rpm, key: "${K.rpm}", limits: { requests_per_minute: 100 } }
      - { id: tpm, key: "${K.tpm}", limits: { tokens_per_minute: 60 } }
      - { id: stream, key: "${K.stream}", limits: { tokens_per_minute: 60 } }
      - { id: budget, key: "${K.budget}", limits: { monthly_budget_usd: 100 } }
      - { id: listed, key: "${K.listed}", limits: { models: [m, auto, emb] } }
      - { id: expired, key: "${K.expired}", limits: { expires_at: "2020-01-01T00:00:00Z", requests_per_minute: 5 } }
      - { id: admin, key: "${K.admin}", permissions: [read, write, admin] }
      - { id: plain, key: "${K.plain}" }
  ${ORG2}:
    plan: pro
    limits: { requests_per_minute: 3 }
    api_keys: [ { id: o2a, key: "${K.o2a}" }, { id: o2b, key: "${K.o2b}" } ]
  ${OTHER}:
    plan: pro
    api_keys: [ { id: other-admin, key: "${K.other}", permissions: [admin] } ]
`;

const headersOf = (r: Reply): Record<string, string> => {
  const out: Record<string, string> = {};
  r.headers.forEach((v, k) => {
    // Per request: its id and the time; every other header must match.
    if (k !== 'x-request-id' && k !== 'date') out[k] = v;
  });
  return out;
};

describeEachStore('Limits', (env) => {
  let t: TestApp;
  const sql = () => t.app.get(SqlStore);
  const post = async (path: string, key: string, body: unknown): Promise<Reply> =>
    readReply(await fetch(`${t.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) }));
  const get = async (path: string, key: string): Promise<Reply> => readReply(await fetch(`${t.url}${path}`, { headers: { authorization: `Bearer ${key}` } }));
  const chat = (key: string, model = 'm', more: Record<string, unknown> = {}) => post('/v1/chat/completions', key, { model, messages: [{ role: 'user', content: 'abcd' }], ...more });
  const embed = (key: string, model = 'emb') => post('/v1/embeddings', key, { model, input: 'abcd' });
  const feedback = (key: string) => post('/v1/feedback', key, { session_id: `s-${run}`, score: 7, useful: true });
  const responses = (key: string, model = 'm') => post('/v1/responses', key, { model, input: 'abcd' });

  beforeAll(async () => {
    await flaky.start();
    t = await startTestApp({ yaml: yaml(), env: env() });
  });
  afterAll(async () => {
    await t?.close();
    await flaky.stop();
  });

  it('requests_per_minute 100: exactly 100 of 1,000 chat requests sent at once, the rest 429 rate_limited with Retry-After', async () => {
    // The key's record is cached first (models are not limited), so 1,000 first requests do not all look it up.
    expect((await get('/v1/models', K.rpm)).status).toBe(200);
    const replies = await Promise.all(Array.from({ length: 1_000 }, () => chat(K.rpm)));
    expect(replies.filter((r) => r.status === 200)).toHaveLength(100);
    const refused = replies.filter((r) => r.status !== 200);
    expect(refused).toHaveLength(900);
    for (const r of refused) {
      expect([r.status, r.json.error]).toEqual([429, { type: 'error', code: 'rate_limited', message: 'Rate limit exceeded: 100 requests per minute for this API key.' }]);
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    }
    // The window is the key's, on every endpoint.
    expect((await embed(K.rpm)).status).toBe(429);
    expect((await feedback(K.rpm)).status).toBe(429);
    expect((await chat(K.plain)).status).toBe(200);
  }, 60_000);

  it('an organisation\'s requests_per_minute counts every key and endpoint of it', async () => {
    expect((await chat(K.o2a)).status).toBe(200);
    expect((await embed(K.o2b)).status).toBe(200);
    expect((await feedback(K.o2a)).status).toBe(200);
    const r = await responses(K.o2b);
    expect([r.status, r.json.error.message]).toEqual([429, 'Rate limit exceeded: 3 requests per minute for the organisation.']);
  });

  it('tokens_per_minute: charged from the estimate, settled to the usage the answer reports', async () => {
    // The estimate: 1 prompt token (4 characters) + max_tokens 10. What an answer uses is its usage.
    const first = await chat(K.tpm, 'm', { max_tokens: 10 });
    expect(first.status).toBe(200);
    const used = first.json.usage.total_tokens as number;
    expect(used).toBeGreaterThan(11);
    let admitted = 1;
    for (;;) {
      const r = await chat(K.tpm, 'm', { max_tokens: 10 });
      if (r.status !== 200) {
        expect([r.status, r.json.error.message]).toEqual([429, 'Token rate limit exceeded: 60 tokens per minute for this API key.']);
        break;
      }
      admitted++;
    }
    // Admitted while what was used plus the next estimate fitted: (n - 1)·used + 11 <= 60.
    expect(admitted).toBe(Math.floor((60 - 11) / used) + 1);
    // Responses shares the key's window.
    expect((await responses(K.tpm)).status).toBe(429);
  });

  it('tokens_per_minute on a stream: settled when the stream ends, from its usage', async () => {
    // Charged 1 + 40 up front; the answer uses about 16. Unsettled, the second request (41 + 41) would not fit 60.
    const stream = async () => {
      const r = await chat(K.stream, 'm', { max_tokens: 40, stream: true, stream_options: { include_usage: true } });
      expect(r.status).toBe(200);
      expect(r.text).toContain('data: [DONE]');
      return JSON.parse(r.text.split('\n\n').filter((l) => l.includes('"usage":{')).pop()!.slice(6)).usage.total_tokens as number;
    };
    const used = await stream();
    expect(used).toBeLessThan(19);
    // The trace (and so the settle) follows the end of the stream by a moment.
    let second: Reply;
    const deadline = Date.now() + 5_000;
    do second = await chat(K.stream, 'm', { max_tokens: 40 });
    while (second.status === 429 && Date.now() < deadline);
    expect(second.status).toBe(200);
    expect((await chat(K.stream, 'm', { max_tokens: 40 })).json.error.code).toBe('rate_limited');
  });

  it('monthly_budget_usd 100: exactly 100 one-dollar requests of 1,000 at once, then 429 budget_exceeded on every endpoint that spends', async () => {
    expect((await get('/v1/models', K.budget)).status).toBe(200);
    const replies = await Promise.all(Array.from({ length: 1_000 }, () => chat(K.budget, 'priced')));
    expect(replies.filter((r) => r.status === 200)).toHaveLength(100);
    const next = new Date(Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth() + 1, 1));
    const r = await chat(K.budget, 'priced');
    expect([r.status, r.json.error]).toEqual([
      429,
      { type: 'error', code: 'budget_exceeded', message: 'The monthly spend budget of 100 USD for this API key is exhausted.', limit: 100, used: 100, reset_at: next.toISOString() },
    ]);
    expect(Number(r.headers.get('retry-after'))).toBe(Math.ceil((next.getTime() - Date.now()) / 1000));
    expect((await embed(K.budget)).json.error.code).toBe('budget_exceeded');
    // A model without a price costs nothing: it still fits the spent budget. Feedback spends nothing.
    expect((await chat(K.budget, 'm')).status).toBe(200);
    expect((await feedback(K.budget)).status).toBe(200);
    // The spend reaches monthly_spend (in batches) and the Admin API.
    let limits: Reply;
    const deadline = Date.now() + 10_000;
    do limits = await get('/v1/admin/limits', K.admin);
    while (limits.json.usage.keys.budget !== 100 && Date.now() < deadline);
    expect(limits.json.usage.keys.budget).toBe(100);
    expect(limits.json.usage.spend_usd).toBeGreaterThanOrEqual(100);
  }, 60_000);

  describe('models allow-list', () => {
    it('403 model_not_allowed for a model off the list, before the body is validated and before any upstream call', async () => {
      const before = flaky.requests.length;
      const bad = await chat(K.listed, 'f', { temperature: 99 });
      expect([bad.status, bad.json.error]).toEqual([403, { type: 'error', code: 'model_not_allowed', message: 'This API key may not use the model "f".', param: 'model' }]);
      // Every entry of a comma list must be allowed, whatever its position.
      expect((await chat(K.listed, 'm,f')).json.error.code).toBe('model_not_allowed');
      expect((await chat(K.listed, 'flaky/f')).json.error.code).toBe('model_not_allowed');
      expect((await responses(K.listed, 'f')).json.error.code).toBe('model_not_allowed');
      expect((await embed(K.listed, 'priced')).json.error.code).toBe('model_not_allowed');
      expect(flaky.requests.length).toBe(before);
      // On the list: validation, then the answer.
      expect((await chat(K.listed, 'm', { temperature: 99 })).json.error).toMatchObject({ code: 'invalid_request', param: 'temperature' });
      for (const model of ['m', 'auto', 'mock/m', 'm, auto']) expect([model, (await chat(K.listed, model)).status]).toEqual([model, 200]);
      expect((await embed(K.listed)).status).toBe(200);
      // A key without a list may use everything.
      expect((await chat(K.plain, 'f')).status).not.toBe(403);
    });

    it('GET /v1/models lists only what the key may use; another name is not found', async () => {
      const list = await get('/v1/models', K.listed);
      expect(list.json.data.map((m: { id: string }) => m.id)).toEqual(['auto', 'emb', 'm']);
      expect((await get('/v1/models', K.plain)).json.data.map((m: { id: string }) => m.id)).toEqual(['auto', 'emb', 'f', 'm', 'priced']);
      expect((await get('/v1/models/m', K.listed)).status).toBe(200);
      expect((await get('/v1/models/mock%2Fm', K.listed)).status).toBe(200);
      const hidden = await get('/v1/models/f', K.listed);
      expect([hidden.status, hidden.json.error.code]).toEqual([404, 'model_not_found']);
      expect(hidden.text).toBe((await get('/v1/models/f', K.listed)).text);
    });
  });

  describe('expires_at', () => {
    it('an expired key is 401 invalid_api_key, byte for byte an unknown key, on every endpoint', async () => {
      const unknown = `gw-unknown-${run}`;
      for (const call of [(k: string) => chat(k), (k: string) => embed(k), (k: string) => feedback(k), (k: string) => get('/v1/models', k), (k: string) => get('/v1/admin/limits', k)]) {
        const expired = await call(K.expired);
        const none = await call(unknown);
        expect(expired.status).toBe(401);
        expect(expired.text).toBe(none.text);
        expect(headersOf(expired)).toEqual(headersOf(none));
      }
    });

    it('a key set to expire through the Admin API answers until then, and as an unknown key after', async () => {
      const created = await http(t).post('/v1/admin/keys').set(auth(K.admin)).send({ permissions: ['read', 'write'] });
      expect(created.status).toBe(201);
      const at = new Date(Date.now() + 1_500).toISOString();
      const patched = await http(t).patch(`/v1/admin/keys/${created.body.id}`).set(auth(K.admin)).send({ limits: { expires_at: at } });
      expect([patched.status, patched.body.limits]).toEqual([200, { expires_at: at }]);
      expect((await chat(created.body.key)).status).toBe(200);
      await new Promise((r) => setTimeout(r, Date.parse(at) - Date.now() + 50));
      const expired = await chat(created.body.key);
      const none = await chat(`gw-unknown-2-${run}`);
      expect([expired.status, expired.text]).toEqual([401, none.text]);
      expect(headersOf(expired)).toEqual(headersOf(none));
    });
  });

  describe('Admin API', () => {
    const keyAudit = async (keyId: string) =>
      (await sql().query<{ action: string; actor: string; actor_key_id: string | null; detail: any }>('SELECT action, actor, actor_key_id, detail FROM key_audit WHERE key_id = $1 ORDER BY id', [keyId])).rows;

    it('PATCH /v1/admin/keys/{id}: a merge patch of the key\'s controls, audited in the same transaction, applied at once', async () => {
      const created = await http(t).post('/v1/admin/keys').set(auth(K.admin)).send({});
      const id = created.body.id as string;
      const p1 = await http(t).patch(`/v1/admin/keys/${id}`).set(auth(K.admin)).send({ limits: { requests_per_minute: 2, models: ['m'] } });
      expect([p1.status, p1.body.id, p1.body.limits]).toEqual([200, id, { requests_per_minute: 2, models: ['m'] }]);
      expect((await chat(created.body.key)).status).toBe(200);
      expect((await chat(created.body.key, 'priced')).json.error.code).toBe('model_not_allowed');
      expect((await chat(created.body.key)).status).toBe(200);
      expect((await chat(created.body.key)).json.error.code).toBe('rate_limited');
      // null removes one control and keeps the others.
      const p2 = await http(t).patch(`/v1/admin/keys/${id}`).set(auth(K.admin)).send({ limits: { requests_per_minute: null, tokens_per_minute: 5000 } });
      expect(p2.body.limits).toEqual({ models: ['m'], tokens_per_minute: 5000 });
      expect((await chat(created.body.key)).status).toBe(200);
      const p3 = await http(t).patch(`/v1/admin/keys/${id}`).set(auth(K.admin)).send({ limits: null });
      expect(p3.body.limits).toBeNull();
      expect((await http(t).get(`/v1/admin/keys/${id}`).set(auth(K.admin))).body.limits).toBeNull();
      expect(await keyAudit(id)).toEqual([
        { action: 'created', actor: 'api', actor_key_id: 'admin', detail: expect.any(Object) },
        { action: 'limits', actor: 'api', actor_key_id: 'admin', detail: { before: null, after: { requests_per_minute: 2, models: ['m'] } } },
        { action: 'limits', actor: 'api', actor_key_id: 'admin', detail: { before: { requests_per_minute: 2, models: ['m'] }, after: { models: ['m'], tokens_per_minute: 5000 } } },
        { action: 'limits', actor: 'api', actor_key_id: 'admin', detail: { before: { models: ['m'], tokens_per_minute: 5000 }, after: null } },
      ]);
    });

    it('refuses a bad body (400 invalid_body naming the field) before 404 and 409, changing nothing', async () => {
      const cases: Array<[unknown, string]> = [
        [{ limits: { rpm: 1 } }, 'limits.rpm'],
        [{ limits: { requests_per_minute: -1 } }, 'limits.requests_per_minute'],
        [{ limits: { models: ['nope'] } }, 'limits.models.0'],
        [{ limits: { expires_at: 'tomorrow' } }, 'limits.expires_at'],
        [{ limits: 5 }, 'limits'],
        [{ other: 1 }, 'other'],
        [{}, 'limits'],
      ];
      for (const [body, param] of cases) {
        for (const id of ['plain', 'no-such-key', 'rpm']) {
          const r = await http(t).patch(`/v1/admin/keys/${id}`).set(auth(K.admin)).send(body as object);
          expect([id, r.status, r.body.error.code, r.body.error.param]).toEqual([id, 400, 'invalid_body', param]);
        }
      }
      expect(await keyAudit('plain')).toEqual([]);
    });

    it('a key from gateway.yaml is 409 config_managed_key; another organisation\'s key is a missing one, byte for byte', async () => {
      const cfg = await http(t).patch('/v1/admin/keys/rpm').set(auth(K.admin)).send({ limits: { requests_per_minute: 1 } });
      expect([cfg.status, cfg.body.error.code]).toEqual([409, 'config_managed_key']);
      expect(await keyAudit('rpm')).toEqual([]);
      const theirs = await http(t).patch('/v1/admin/keys/rpm').set(auth(K.other)).send({ limits: { requests_per_minute: 1 } });
      const missing = await http(t).patch('/v1/admin/keys/no-such-key').set(auth(K.other)).send({ limits: { requests_per_minute: 1 } });
      expect([theirs.status, theirs.text]).toEqual([404, missing.text]);
      const noAdmin = await http(t).patch('/v1/admin/keys/plain').set(auth(K.plain)).send({ limits: { requests_per_minute: 1 } });
      expect([noAdmin.status, noAdmin.body.error.code]).toEqual([403, 'admin_permission']);
    });

    it('GET /v1/admin/limits shows the organisation\'s controls; one from gateway.yaml refuses PATCH with 409 config_managed_org', async () => {
      const r = await http(t).get('/v1/admin/limits').set(auth(K.admin));
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ organization: ORG, config_managed: true, limits: null, usage: { month: new Date().toISOString().slice(0, 7) } });
      const p = await http(t).patch('/v1/admin/limits').set(auth(K.admin)).send({ limits: { requests_per_minute: 1 } });
      expect([p.status, p.body.error.code]).toEqual([409, 'config_managed_org']);
      const audit = await http(t).get('/v1/admin/limits/audit').set(auth(K.admin));
      expect(audit.body).toEqual({ data: [], next_cursor: null });
    });

    it('PATCH /v1/admin/limits changes an organisation\'s controls (not from gateway.yaml), with its org_audit row; every key of it is held to them at once', async () => {
      const orgId = `cli-${run}`;
      await t.app.get(TenancyRepository).upsertOrg({ id: orgId, name: orgId, plan: 'pro', features: [], monthlyRequestLimit: null, killSwitches: [], limits: null, source: 'cli' });
      const tenancy = t.app.get(TenancyService);
      const admin = await tenancy.createKey(orgId, ['read', 'write', 'admin']);
      const worker = await tenancy.createKey(orgId, ['read', 'write']);
      expect((await chat(worker.key)).status).toBe(200);
      const p = await http(t).patch('/v1/admin/limits').set(auth(admin.key)).send({ limits: { requests_per_minute: 2, models: ['m', 'emb'] } });
      expect([p.status, p.body.organization, p.body.config_managed, p.body.limits]).toEqual([200, orgId, false, { requests_per_minute: 2, models: ['m', 'emb'] }]);
      expect((await get('/v1/models', worker.key)).json.data.map((m: { id: string }) => m.id)).toEqual(['emb', 'm']);
      expect((await chat(worker.key, 'priced')).json.error.code).toBe('model_not_allowed');
      expect((await chat(worker.key)).status).toBe(200);
      expect((await embed(admin.key)).status).toBe(200);
      expect((await chat(worker.key)).json.error.message).toBe('Rate limit exceeded: 2 requests per minute for the organisation.');
      const audit = await http(t).get('/v1/admin/limits/audit').set(auth(admin.key));
      expect(audit.body.data).toEqual([
        { id: expect.any(String), action: 'limits', actor: 'api', actor_key_id: admin.id, detail: { before: null, after: { requests_per_minute: 2, models: ['m', 'emb'] } }, created_at: expect.any(String) },
      ]);
      const cleared = await http(t).patch('/v1/admin/limits').set(auth(admin.key)).send({ limits: null });
      expect(cleared.body.limits).toBeNull();
      expect((await http(t).get('/v1/admin/limits/audit?limit=1').set(auth(admin.key))).body.next_cursor).toEqual(expect.any(String));
    });
  });
});
