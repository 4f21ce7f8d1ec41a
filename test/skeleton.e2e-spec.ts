import { CacheStore } from '../src/stores/cache/cache-store';
import { ApiKeyHasher } from '../src/tenancy/api-key-hasher';
import { TenancyService } from '../src/tenancy/tenancy.service';
import {
  FREE_KEY, KILLED_KEY, NO_FEATURES_KEY, PRO_KEY, READ_ONLY_KEY, startTestApp, TestApp, WRITE_ONLY_KEY,
} from './support/app';
import { ProbeController } from './support/probe.controller';
import { readReply } from './support/http-check';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ controllers: [ProbeController] });
});
afterAll(() => t.close());

interface Call {
  method?: string;
  key?: string | null;
  headers?: Record<string, string>;
  body?: string;
}
async function call(path: string, c: Call = {}) {
  const headers: Record<string, string> = { ...(c.headers ?? {}) };
  if (c.key !== null) headers.authorization ??= `Bearer ${c.key ?? PRO_KEY}`;
  if (c.body !== undefined) headers['content-type'] ??= 'application/json';
  const res = await fetch(t.url + path, { method: c.method ?? (c.body !== undefined ? 'POST' : 'GET'), headers, body: c.body });
  return readReply(res);
}
const confirm = { 'x-gateway-confirm': 'experiments' };
const code = (r: { json: any }) => r.json?.error?.code;

/** A JSON object of exactly `size` bytes (padded with spaces inside the object). */
function jsonOfSize(size: number, obj: Record<string, unknown> = { type: 'canary', traffic_pct: 5 }): string {
  const core = JSON.stringify(obj);
  return core.slice(0, -1) + ' '.repeat(size - core.length) + '}';
}

describe('API-key guard (401 invalid_api_key)', () => {
  it('refuses missing, malformed, unknown and revoked keys with one byte-identical body', async () => {
    const tenancy = t.app.get(TenancyService);
    const { key: revoked, id } = await tenancy.createKey('acme', ['read', 'write']);
    expect((await call('/v1/probe/experiments', { key: revoked })).status).toBe(200);
    expect(await tenancy.revokeKey(id)).toBe(true);

    const cases = await Promise.all([
      call('/v1/probe/experiments', { key: null }),
      call('/v1/probe/experiments', { key: null, headers: { authorization: 'Basic abc' } }),
      call('/v1/probe/experiments', { key: null, headers: { authorization: 'Bearer ' } }),
      call('/v1/probe/experiments', { key: 'gw-unknown-key' }),
      call('/v1/probe/experiments', { key: revoked }),
    ]);
    for (const r of cases) {
      expect(r.status).toBe(401);
      expect(r.text).toBe(cases[0].text);
    }
    expect(cases[0].json).toEqual({ error: { type: 'error', code: 'invalid_api_key', message: 'The API key is missing or invalid.' } });
  });

  it('lets public routes through without a key', async () => {
    expect((await call('/health', { key: null })).status).toBe(200);
    expect((await call('/metrics', { key: null })).status).toBe(200);
  });
});

describe('permission, plan and confirmation guards', () => {
  it('403 read_permission / write_permission', async () => {
    expect(code(await call('/v1/probe/experiments', { key: WRITE_ONLY_KEY }))).toBe('read_permission');
    const r = await call('/v1/probe/experiments', { key: READ_ONLY_KEY, headers: confirm, body: '{}' });
    expect([r.status, code(r)]).toEqual([403, 'write_permission']);
  });

  it('403 plan_required for a free plan, a missing feature and a kill switch, naming the feature', async () => {
    const free = await call('/v1/probe/experiments', { key: FREE_KEY });
    expect([free.status, code(free)]).toEqual([403, 'plan_required']);
    const bare = await call('/v1/probe/explain', { key: NO_FEATURES_KEY, body: '{}' });
    expect([bare.status, code(bare)]).toEqual([403, 'plan_required']);
    expect(bare.json.error.message).toContain('routing explain');
    const killed = await call('/v1/probe/experiments', { key: KILLED_KEY });
    expect([killed.status, code(killed)]).toEqual([403, 'plan_required']);
    expect(killed.json.error.message).toContain('kill switch experiments');
    // The explain endpoint has no kill switch: the same org passes there.
    expect((await call('/v1/probe/explain', { key: KILLED_KEY, body: '{}' })).status).toBe(200);
  });

  it('400 missing_confirmation for a missing or inexact header', async () => {
    for (const headers of [{} as Record<string, string>, { 'x-gateway-confirm': 'Experiments' }, { 'x-gateway-confirm': 'experiment' }, { 'x-gateway-confirm': 'experiments,experiments' }]) {
      const r = await call('/v1/probe/experiments', { headers, body: jsonOfSize(50) });
      expect([r.status, code(r)]).toEqual([400, 'missing_confirmation']);
    }
    expect((await call('/v1/probe/experiments', { headers: confirm, body: jsonOfSize(50) })).status).toBe(201);
  });

  it('applies the check order 401 → 403 → confirmation → body cap → body → traffic_pct', async () => {
    const huge = 'x'.repeat(9000);
    expect(code(await call('/v1/probe/experiments', { key: 'nope', body: huge }))).toBe('invalid_api_key');
    expect(code(await call('/v1/probe/experiments', { key: READ_ONLY_KEY, body: huge }))).toBe('write_permission');
    expect(code(await call('/v1/probe/experiments', { key: FREE_KEY, body: huge }))).toBe('plan_required');
    expect(code(await call('/v1/probe/experiments', { body: huge }))).toBe('missing_confirmation');
    expect(code(await call('/v1/probe/experiments', { headers: confirm, body: huge }))).toBe('body_too_large');
    expect(code(await call('/v1/probe/experiments', { headers: confirm, body: '{"type":"canary","traffic_pct":500' }))).toBe('invalid_body');
    const unknownKey = await call('/v1/probe/experiments', { headers: confirm, body: '{"type":"canary","traffic_pct":5,"colour":1}' });
    expect([code(unknownKey), unknownKey.json.error.param]).toEqual(['invalid_body', 'colour']);
    const badType = await call('/v1/probe/experiments', { headers: confirm, body: '{"type":"blue","traffic_pct":500}' });
    expect([code(badType), badType.json.error.param]).toEqual(['invalid_body', 'type']);
    expect(code(await call('/v1/probe/experiments', { headers: confirm, body: '{"type":"canary","traffic_pct":500}' }))).toBe('invalid_traffic_pct');
  });
});

describe('body caps and JSON safety', () => {
  it.each([
    ['experiments', 8 * 1024, confirm],
    ['explain', 64 * 1024, {}],
    ['chat', 4 * 1024 * 1024, {}],
  ])('%s: exactly the cap passes, one byte more is 400 body_too_large', async (route, cap, headers) => {
    const ok = await call(`/v1/probe/${route}`, { headers, body: jsonOfSize(cap) });
    expect(ok.status).toBeLessThan(300);
    const over = await call(`/v1/probe/${route}`, { headers, body: jsonOfSize(cap + 1) });
    expect([over.status, code(over)]).toEqual([400, 'body_too_large']);
  });

  it('refuses a body larger than the cap sent without Content-Length (chunked)', async () => {
    const body = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(jsonOfSize(70 * 1024)));
        controller.close();
      },
    });
    const res = await fetch(`${t.url}/v1/probe/explain`, {
      method: 'POST',
      headers: { authorization: `Bearer ${PRO_KEY}`, 'content-type': 'application/json' },
      body,
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(400);
    expect(((await res.json()) as any).error.code).toBe('body_too_large');
  });

  it('malformed, too deep, and prototype keys: 400 with the route code, never 500', async () => {
    const deep = `{"a":${'['.repeat(65)}${']'.repeat(65)}}`;
    for (const [route, expected, headers] of [
      ['explain', 'invalid_body', {}],
      ['chat', 'invalid_request', {}],
    ] as const) {
      for (const body of ['{"a":', 'not json', '', deep, '{"__proto__":{"admin":true}}', '{"x":{"constructor":{}}}']) {
        const r = await call(`/v1/probe/${route}`, { headers, body });
        expect([body, r.status, code(r)]).toEqual([body, 400, expected]);
      }
    }
  });
});

describe('errors, request ids, logs and metrics', () => {
  it('an unknown route is 404 not_found in the contract body', async () => {
    const r = await call('/v1/nothing-here');
    expect(r.status).toBe(404);
    expect(r.json).toEqual({ error: { type: 'error', code: 'not_found', message: 'No such endpoint.' } });
  });

  it('an unexpected error is 500 internal with no internals, logged with the request id', async () => {
    const r = await call('/v1/probe/boom', { headers: { 'x-request-id': 'req-boom-1' } });
    expect(r.status).toBe(500);
    expect(r.json).toEqual({ error: { type: 'error', code: 'internal', message: 'Internal error.' } });
    expect(r.text).not.toContain('hunter2');
    expect(r.headers.get('x-request-id')).toBe('req-boom-1');
    const line = t.logs.map((l) => JSON.parse(l)).find((l) => l.msg === 'unexpected error' && l.req_id === 'req-boom-1');
    expect(line).toBeDefined();
  });

  it('echoes a well-formed x-request-id and replaces a malformed one', async () => {
    expect((await call('/health', { headers: { 'x-request-id': 'abc.DEF:1-2_3' } })).headers.get('x-request-id')).toBe('abc.DEF:1-2_3');
    const generated = (await call('/health', { headers: { 'x-request-id': 'bad id\twith spaces' } })).headers.get('x-request-id');
    expect(generated).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('writes one access line per request and never a key, an Authorization header or a body', async () => {
    await call('/v1/probe/chat', { headers: { 'x-request-id': 'req-log-1' }, body: '{"messages":"PROMPT-MARKER-7731"}' });
    const lines = t.logs.map((l) => JSON.parse(l));
    const access = lines.filter((l) => l.msg === 'request' && l.req_id === 'req-log-1');
    expect(access).toHaveLength(1);
    expect(access[0]).toMatchObject({ method: 'POST', route: '/v1/probe/chat', status: 200, org_id: 'acme', key_id: 'acme-rw' });
    const all = t.logs.join('\n');
    for (const secret of [PRO_KEY, READ_ONLY_KEY, FREE_KEY, 'PROMPT-MARKER-7731', 'Bearer']) expect(all).not.toContain(secret);
  });

  it('exposes request counters and latency histograms in Prometheus format', async () => {
    await call('/health');
    const r = await call('/metrics', { key: null });
    expect(r.headers.get('content-type')).toContain('text/plain');
    expect(r.text).toMatch(/gateway_http_requests_total\{route="\/health",method="GET",status="200"\} \d+/);
    expect(r.text).toContain('gateway_http_request_duration_seconds_bucket');
  });
});

describe('tenancy seeding', () => {
  it('evicts the shared key cache of every configured organisation, so a changed config applies after a restart', async () => {
    const tenancy = t.app.get(TenancyService);
    const { key } = await tenancy.createKey('acme', ['read']);
    expect(await tenancy.authenticate(key)).toMatchObject({ orgId: 'acme' });
    const sharedKey = `auth:{key:${t.app.get(ApiKeyHasher).hash(key)}}`;
    const cache = t.app.get(CacheStore);
    expect(await cache.get(sharedKey)).not.toBeNull();
    await tenancy.seed(t.config.gateway, { demo: false });
    expect(await cache.get(sharedKey)).toBeNull();
  });
});
