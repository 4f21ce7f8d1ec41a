/**
 * Admin API, providers (docs/api.md "Admin API"): each provider's breaker now, its recent transitions
 * (opened with the failure that opened it, the half-open probe, closed) and the organisation's
 * request and error counts; with Redis, one replica sees the transitions another made. On PGlite and
 * on real Postgres + Redis.
 */
import { randomBytes } from 'node:crypto';
import { CircuitBreakerOptions } from '../src/resilience/circuit-breaker/circuit-breaker.service';
import { DecisionTraceWriter } from '../src/traces/decision-trace.writer';
import { ADMIN_KEY, auth, describeEachStore, http, OTHER_ADMIN_KEY, OTHER_RW_KEY, RW_KEY } from './support/admin';
import { startTestApp, TestApp } from './support/app';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
/** Breakers that open after 2 failures for 4 s (long enough for the checks while open on a loaded machine), no jitter. */
const OPEN_MS = 4_000;
const BREAKERS = { provide: CircuitBreakerOptions, useValue: { failureThreshold: 2, baseOpenMs: OPEN_MS, maxOpenMs: OPEN_MS, jitter: 0 } };

/** Provider ids of their own: every suite on the same Redis shares breaker state by provider id. */
function yaml(flaky: string, steady: string): string {
  return `
providers:
  ${flaky}: { family: mock }
  ${steady}: { family: mock }
models:
  bad: { provider: ${flaky}, upstream: "bad+error-503", type: chat }
  fine: { provider: ${flaky}, type: chat }
  other: { provider: ${steady}, type: chat }
organizations:
  acme:
    plan: pro
    api_keys:
      - { id: acme-admin, key: "${ADMIN_KEY}", permissions: [read, write, admin] }
      - { id: acme-rw, key: "${RW_KEY}", permissions: [read, write] }
  other:
    plan: pro
    api_keys:
      - { id: other-admin, key: "${OTHER_ADMIN_KEY}", permissions: [admin] }
      - { id: other-rw, key: "${OTHER_RW_KEY}", permissions: [read, write] }
`;
}

describeEachStore('Admin API: providers', (env) => {
  const flaky = `flaky${randomBytes(4).toString('hex')}`;
  const steady = `steady${randomBytes(4).toString('hex')}`;
  let t: TestApp;
  const chat = (model: string, key = RW_KEY) => http(t).post('/v1/chat/completions').set(auth(key)).send({ model, messages: [{ role: 'user', content: 'hi' }] });
  const provider = async (id: string, key = ADMIN_KEY, app = t) => (await http(app).get('/v1/admin/providers').set(auth(key))).body.data.find((p: any) => p.id === id);

  beforeAll(async () => {
    t = await startTestApp({ yaml: yaml(flaky, steady), env: env(), overrides: [BREAKERS] });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('opened by two failures: state open, the transition with the failure that opened it, the organisation\'s counts', async () => {
    expect((await chat('bad')).status).toBe(502);
    expect((await chat('bad')).status).toBe(502);
    expect((await chat('bad')).status).toBe(503);
    await t.app.get(DecisionTraceWriter).flush();

    const r = await http(t).get('/v1/admin/providers').set(auth(ADMIN_KEY));
    expect(r.status).toBe(200);
    expect(r.body.next_cursor).toBeNull();
    expect(r.body.window).toEqual({ from: expect.any(String), to: expect.any(String) });
    expect(r.body.data.map((p: any) => p.id)).toEqual([flaky, steady].sort());
    const p = r.body.data.find((x: any) => x.id === flaky);
    expect(p).toMatchObject({
      family: 'mock',
      breaker: { state: 'open', open_until: expect.any(String), consecutive_failures: expect.any(Number) },
      traffic: { requests: 2, errors: 2, error_rate: 1 },
    });
    expect(p.transitions).toEqual([
      { at: expect.any(String), from: 'closed', to: 'open', cause: { error: 'status', status: 503 }, open_until: p.breaker.open_until, openings: 1, replica: expect.stringMatching(/^[0-9a-f]{12}$/) },
    ]);
    expect(await provider(steady)).toMatchObject({ breaker: { state: 'closed', open_until: null }, transitions: [], traffic: { requests: 0, errors: 0, error_rate: null } });
    // Breakers are the provider's; the counts are the organisation's own.
    expect(await provider(flaky, OTHER_ADMIN_KEY)).toMatchObject({ breaker: { state: 'open' }, traffic: { requests: 0, errors: 0 } });
  });

  it('the probe after the open time: half_open, then closed when it succeeds', async () => {
    await sleep(OPEN_MS + 100);
    expect((await chat('fine')).status).toBe(200);
    await t.app.get(DecisionTraceWriter).flush();
    const one = await http(t).get(`/v1/admin/providers/${flaky}`).set(auth(ADMIN_KEY));
    expect(one.status).toBe(200);
    expect(one.body.breaker.state).toBe('closed');
    expect(one.body.transitions.map((x: any) => [x.from, x.to, x.cause])).toEqual([
      ['half_open', 'closed', null],
      ['open', 'half_open', null],
      ['closed', 'open', { error: 'status', status: 503 }],
    ]);
    expect(one.body.traffic).toEqual({ requests: 3, errors: 2, error_rate: 2 / 3 });
    expect(one.body.window).toEqual({ from: expect.any(String), to: expect.any(String) });
  });

  it('an unknown provider is 404; bad parameters 400 naming them; 401 and 403 first', async () => {
    for (const id of ['nope', '__proto__', 'constructor']) {
      const r = await http(t).get(`/v1/admin/providers/${id}`).set(auth(ADMIN_KEY));
      expect([r.status, r.body.error]).toEqual([404, { type: 'error', code: 'not_found', message: 'No provider with this id.' }]);
    }
    for (const [q, param] of [
      [{ limit: '0' }, 'limit'],
      [{ from: 'now' }, 'from'],
      [{ state: 'open' }, 'state'],
    ] as const) {
      const r = await http(t).get('/v1/admin/providers').query(q).set(auth(ADMIN_KEY));
      expect([r.status, r.body.error.code, r.body.error.param]).toEqual([400, 'invalid_request', param]);
    }
    const first = await http(t).get('/v1/admin/providers').query({ limit: 1 }).set(auth(ADMIN_KEY));
    const second = await http(t).get('/v1/admin/providers').query({ limit: 1, cursor: first.body.next_cursor }).set(auth(ADMIN_KEY));
    expect([...first.body.data, ...second.body.data].map((p: any) => p.id)).toEqual([flaky, steady].sort());
    expect(second.body.next_cursor).toBeNull();
    expect((await http(t).get('/v1/admin/providers')).status).toBe(401);
    const rw = await http(t).get(`/v1/admin/providers/${flaky}?limit=0`).set(auth(RW_KEY));
    expect([rw.status, rw.body.error.code]).toEqual([403, 'admin_permission']);
  });

  it('with a shared cache store, another replica sees the transitions this one made', async () => {
    if (!env().REDIS_URL) {
      // Without Redis each replica's breakers and transitions are its own: a second app sees none of these.
      const b = await startTestApp({ yaml: yaml(flaky, steady), env: env(), overrides: [BREAKERS] });
      try {
        expect((await provider(flaky, ADMIN_KEY, b)).transitions).toEqual([]);
      } finally {
        await b.close();
      }
      return;
    }
    const b = await startTestApp({ yaml: yaml(flaky, steady), env: env(), overrides: [BREAKERS] });
    try {
      const mine = (await provider(flaky)).transitions;
      const seen = (await provider(flaky, ADMIN_KEY, b)).transitions;
      expect(seen).toEqual(mine);
      expect(new Set(seen.map((x: any) => x.replica)).size).toBe(1);
    } finally {
      await b.close();
    }
  });
});
