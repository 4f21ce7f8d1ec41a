/**
 * Every Admin API route (docs/api.md "Admin API"): 401 before 403 before any 400, the one 403 code
 * `admin_permission`, and, read with an admin key after real traffic, no answer carrying an API key,
 * a key hash or the text of a request. On PGlite and on real Postgres + Redis.
 */
import { SqlStore } from '../src/stores/sql/sql-store';
import { DecisionTraceWriter } from '../src/traces/decision-trace.writer';
import { ADMIN_KEY, adminYaml, auth, describeEachStore, http, OTHER_ADMIN_KEY, OTHER_RW_KEY, RW_KEY } from './support/admin';
import { startTestApp, TestApp } from './support/app';

const PROMPT = 'my password is hunter2';

/** [method, path]; `:key`, `:trace`, `:experiment` are filled in from the app's own data. */
const ROUTES: Array<[string, string]> = [
  ['get', '/v1/admin/usage'],
  ['get', '/v1/admin/models'],
  ['get', '/v1/admin/providers'],
  ['get', '/v1/admin/providers/mock'],
  ['get', '/v1/admin/experiments'],
  ['get', '/v1/admin/experiments/:experiment'],
  ['get', '/v1/admin/experiments/:experiment/events'],
  ['get', '/v1/admin/traces'],
  ['get', '/v1/admin/traces/:trace'],
  ['get', '/v1/admin/keys'],
  ['get', '/v1/admin/keys/:key'],
  ['get', '/v1/admin/keys/:key/audit'],
  ['post', '/v1/admin/keys'],
  ['post', '/v1/admin/keys/:key/revoke'],
  ['delete', '/v1/admin/keys/:key'],
];

describeEachStore('Admin API: access and what answers carry', (env) => {
  let t: TestApp;
  const ids: Record<string, string> = {};
  const fill = (path: string) => path.replace(/:(\w+)/g, (_, k: string) => ids[k]);
  const send = (method: string, path: string, key?: string) => {
    let req = (http(t) as any)[method](path);
    if (key) req = req.set(auth(key));
    return req.set('content-type', 'application/json').send(method === 'post' && !path.endsWith('/revoke') ? '{"permissions":["read"]}' : undefined);
  };

  beforeAll(async () => {
    t = await startTestApp({ yaml: adminYaml(), env: env() });
    for (const key of [RW_KEY, OTHER_RW_KEY]) {
      const r = await http(t).post('/v1/chat/completions').set(auth(key)).set('gateway-session-id', 'acc-1').send({ model: 'auto', messages: [{ role: 'user', content: PROMPT }] });
      expect(r.status).toBe(200);
    }
    await t.app.get(DecisionTraceWriter).flush();
    const created = await http(t).post('/v1/experiments').set(auth(RW_KEY)).set('x-gateway-confirm', 'experiments').send({
      type: 'canary', baseline: { provider: 'mock', model: 'mock-fast' }, candidate: { provider: 'mock', model: 'mock-smart' }, traffic_pct: 1,
    });
    ids.experiment = created.body.id;
    ids.trace = (await http(t).get('/v1/admin/traces').set(auth(ADMIN_KEY))).body.data[0].id;
    ids.key = (await http(t).post('/v1/admin/keys').set(auth(ADMIN_KEY)).send({ permissions: ['read'] })).body.id;
  });
  afterAll(async () => {
    await t?.close();
  });

  it('401 for no key and for an unknown key, one body; then 403 admin_permission for keys without it; both before any 400', async () => {
    let unauthenticated: string | undefined;
    for (const [method, raw] of ROUTES) {
      const path = `${fill(raw)}?limit=0&bogus=1`;
      for (const key of [undefined, 'gw-unknown']) {
        const r = await send(method, path, key);
        expect([raw, r.status]).toEqual([raw, 401]);
        unauthenticated ??= r.text;
        expect(r.text).toBe(unauthenticated);
      }
      for (const key of [RW_KEY, OTHER_RW_KEY]) {
        const r = await send(method, path, key);
        expect([raw, r.status, r.body.error?.code]).toEqual([raw, 403, 'admin_permission']);
      }
      const bad = await send(method, path, ADMIN_KEY);
      expect([raw, bad.status, bad.body.error?.code]).toEqual([raw, 400, 'invalid_request']);
    }
  });

  it('no answer of any route carries an API key, a key hash or request text', async () => {
    const hashes = (await t.app.get(SqlStore).query<{ key_hash: string }>('SELECT key_hash FROM api_keys')).rows.map((r) => r.key_hash);
    for (const [method, raw] of ROUTES) {
      if (method !== 'get') continue;
      for (const key of [ADMIN_KEY, OTHER_ADMIN_KEY]) {
        const r = await send(method, fill(raw), key);
        expect([raw, r.status === 200 || r.status === 404]).toEqual([raw, true]);
        for (const secret of [ADMIN_KEY, RW_KEY, OTHER_ADMIN_KEY, OTHER_RW_KEY, PROMPT, 'hunter2', ...hashes]) expect(r.text).not.toContain(secret);
      }
    }
  });

  it('another organisation\'s admin key reads none of this organisation\'s objects', async () => {
    for (const raw of ['/v1/admin/experiments/:experiment', '/v1/admin/experiments/:experiment/events', '/v1/admin/traces/:trace', '/v1/admin/keys/:key', '/v1/admin/keys/:key/audit']) {
      const r = await send('get', fill(raw), OTHER_ADMIN_KEY);
      expect([raw, r.status, r.body.error?.code]).toEqual([raw, 404, 'not_found']);
    }
    for (const [raw, field] of [['/v1/admin/experiments', 'id'], ['/v1/admin/traces', 'request_id'], ['/v1/admin/keys', 'id']] as const) {
      const mine = (await send('get', raw, ADMIN_KEY)).body.data.map((x: any) => x[field]);
      const theirs = (await send('get', raw, OTHER_ADMIN_KEY)).body.data.map((x: any) => x[field]);
      expect(theirs.filter((x: string) => mine.includes(x))).toEqual([]);
    }
  });
});
