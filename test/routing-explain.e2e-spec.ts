import { LimitsService } from '../src/limits/limits.service';
import { RoutingService } from '../src/routing/routing.service';
import type { RoutingInput } from '../src/routing/routing.types';
import { isReservedHeader } from '../src/routing-explain/header-sanitiser';
import { TEMPLATE_IDS } from '../src/routing-explain/explain-texts';
import { CacheStore } from '../src/stores/cache/cache-store';
import { SqlStore } from '../src/stores/sql/sql-store';
import { DecisionTraceWriter } from '../src/traces/decision-trace.writer';
import { OpenAiFake } from './fakes/openai-fake';
import { FREE_KEY, NO_FEATURES_KEY, PRO_KEY, READ_ONLY_KEY, startTestApp, TestApp } from './support/app';
import { readReply, type Reply } from './support/http-check';
import { closedPort } from './support/kit';
import { describeWithRedis, TEST_REDIS_URL } from './support/real-servers';

/**
 * `POST /v1/routing/explain` through HTTP against the real app (docs/api.md "POST /v1/routing/explain",
 * "Errors", "Authentication"). Every organisation
 * below serves one group of tests, so the 30/min organisation window of one group never leaks into another.
 */
const upstream = new OpenAiFake({ variant: 'openai' });
const MARKER = 'PROMPT-MARKER-EXPLAIN-9f31c7';
const HEADER_MARKER = 'HEADER-MARKER-EXPLAIN-41aa';

const keys = (org: string, n: number) => Array.from({ length: n }, (_, i) => `gw-${org}-${i + 1}`);
const keyList = (org: string, n: number) => keys(org, n).map((k, i) => `{ id: ${org}-${i + 1}, key: "${k}" }`).join(', ');
const FEATURES = '[has_test_ab, feedback_routing, explain]';

const yaml = (fakeUrl: string, org = (name: string) => name) => `
providers:
  fake: { family: openai, base_url: "${fakeUrl}", api_key: "sk-fake" }
  mock: { family: mock }
models:
  f-model: { provider: fake, upstream: f-upstream, type: chat }
  mock-fast: { provider: mock, type: chat }
  mock-slow: { provider: mock, type: chat }
  ${'l'.repeat(700)}: { provider: mock, type: chat }
routes:
  - { name: default, models: [auto], strategy: ordered, targets: [fake/f-model, mock/mock-fast, mock/mock-slow] }
  - { name: coin, models: [coin], strategy: weighted, weights: [1, 3], targets: [mock/mock-fast, mock/mock-slow] }
  - { name: support, models: [support], strategy: ordered, targets: [mock/mock-fast], template: support }
  - { name: others-only, orgs: [someone-else], models: [secret-alias], targets: [mock/mock-fast] }
  - { name: long, models: [long], strategy: ordered, targets: [mock/${'l'.repeat(700)}, mock/mock-fast] }
  - { name: learn, models: [learn], strategy: feedback_driven, targets: [mock/mock-fast, mock/mock-slow] }
firewall: { rules: [ { id: no-secrets, pattern: "api[_-]?key\\\\s*[:=]", action: block } ] }
templates:
  support: { system: "You help {{customer}}." }
limits: { requests_per_minute_per_key: 3 }
organizations:
  ${org('acme')}:
    plan: pro
    features: ${FEATURES}
    api_keys:
      - { id: acme-rw, key: "${PRO_KEY}", permissions: [read, write] }
      - { id: acme-ro, key: "${READ_ONLY_KEY}", permissions: [read] }
  ${org('shape')}: { plan: pro, features: ${FEATURES}, api_keys: [ ${keyList(org('shape'), 3)} ] }
  ${org('burst')}: { plan: pro, features: ${FEATURES}, api_keys: [ ${keyList(org('burst'), 1)} ] }
  ${org('wide')}: { plan: pro, features: ${FEATURES}, api_keys: [ ${keyList(org('wide'), 5)} ] }
  ${org('fx')}: { plan: pro, features: ${FEATURES}, monthly_request_limit: 5, api_keys: [ ${keyList(org('fx'), 1)} ] }
  freeco: { plan: free, features: ${FEATURES}, api_keys: [ { id: free-rw, key: "${FREE_KEY}" } ] }
  bareco: { plan: pro, api_keys: [ { id: bare-rw, key: "${NO_FEATURES_KEY}" } ] }
  noexplain: { plan: pro, features: [has_test_ab, feedback_routing], api_keys: [ { id: noexplain-rw, key: "gw-noexplain" } ] }
  nofr: { plan: pro, features: [has_test_ab, explain], api_keys: [ { id: nofr-rw, key: "gw-nofr" } ] }
`;


async function post(base: string, opts: { key?: string | null; body?: unknown; raw?: string; headers?: Record<string, string>; path?: string } = {}): Promise<Reply> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...(opts.headers ?? {}) };
  if (opts.key !== null) headers.authorization ??= `Bearer ${opts.key ?? PRO_KEY}`;
  const res = await fetch(base + (opts.path ?? '/v1/routing/explain'), {
    method: 'POST',
    headers,
    body: opts.raw ?? JSON.stringify(opts.body ?? { request: chat('auto') }),
  });
  return readReply(res);
}

function chat(model: string, content = 'route me', extra: Record<string, unknown> = {}) {
  return { model, messages: [{ role: 'user', content }], ...extra };
}

const code = (r: Reply) => r.json?.error?.code;
const statusCode = (r: Reply) => `${r.status} ${code(r) ?? ''}`.trim();

/** An explain body of exactly `size` bytes: a valid body padded with spaces before its closing brace. */
function bodyOfSize(size: number): string {
  const core = JSON.stringify({ request: chat('auto') });
  return core.slice(0, -1) + ' '.repeat(size - Buffer.byteLength(core)) + '}';
}

/** Counter series of /metrics, minus the per-request HTTP counter and the process's own (CPU, GC) counters. */
async function counters(base: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const counterNames = new Set([...text.matchAll(/^# TYPE (\S+) counter$/gm)].map((m) => m[1]));
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$/.exec(line);
    if (!m || !counterNames.has(m[1])) continue;
    if (m[1] === 'gateway_http_requests_total' || /^gateway_(process|nodejs)_/.test(m[1])) continue;
    out.set(m[1] + (m[2] ?? ''), Number(m[3]));
  }
  return out;
}

let t: TestApp;
beforeAll(async () => {
  await upstream.start();
  t = await startTestApp({ yaml: yaml(upstream.url) });
});
afterAll(async () => {
  await t.close();
  await upstream.stop();
});

describe('the error table', () => {
  it('401 invalid_api_key without a key or with an unknown key', async () => {
    for (const key of [null, 'gw-nobody']) {
      const r = await post(t.url, { key });
      expect([r.status, code(r)]).toEqual([401, 'invalid_api_key']);
    }
  });

  it('403 write_permission for a read-only key', async () => {
    const r = await post(t.url, { key: READ_ONLY_KEY });
    expect([r.status, code(r)]).toEqual([403, 'write_permission']);
  });

  it('403 plan_required for the free plan and for a missing explain or feedback_routing feature, naming it', async () => {
    const free = await post(t.url, { key: FREE_KEY });
    expect([free.status, code(free)]).toEqual([403, 'plan_required']);
    expect(free.json.error.message).toContain('Pro plan');
    const bare = await post(t.url, { key: NO_FEATURES_KEY });
    expect([bare.status, code(bare), bare.json.error.message]).toEqual([403, 'plan_required', expect.stringContaining('explain, feedback_routing')]);
    const noExplain = await post(t.url, { key: 'gw-noexplain' });
    expect([noExplain.status, code(noExplain)]).toEqual([403, 'plan_required']);
    expect(noExplain.json.error.message).toMatch(/routing explain is not enabled .*feature explain\)/);
    const noFr = await post(t.url, { key: 'gw-nofr' });
    expect([noFr.status, code(noFr)]).toEqual([403, 'plan_required']);
    expect(noFr.json.error.message).toMatch(/feature feedback_routing\)/);
  });

  it('401 and 403 come before any 400 about the body', async () => {
    const huge = 'x'.repeat(70 * 1024);
    expect(code(await post(t.url, { key: null, raw: huge }))).toBe('invalid_api_key');
    expect(code(await post(t.url, { key: READ_ONLY_KEY, raw: huge }))).toBe('write_permission');
    expect(code(await post(t.url, { key: 'gw-nofr', raw: huge }))).toBe('plan_required');
  });

  it('400 invalid_body: not JSON, unknown top-level key, bad request, bad headers', async () => {
    const cases: Array<[string, string, string | undefined]> = [
      ['not json', '{"request":', undefined],
      ['empty', '', undefined],
      ['an array', '[]', undefined],
      ['unknown key', JSON.stringify({ request: chat('auto'), dry_run: false }), 'dry_run'],
      ['no request', JSON.stringify({ headers: {} }), 'request'],
      ['request not an object', JSON.stringify({ request: 'auto' }), 'request'],
      ['request without messages', JSON.stringify({ request: { model: 'auto' } }), 'request.messages'],
      ['request with a bad field', JSON.stringify({ request: chat('auto', 'x', { temperature: 7 }) }), 'request.temperature'],
      ['request with an unknown field', JSON.stringify({ request: chat('auto', 'x', { colour: 'red' }) }), 'request.colour'],
      ['headers not an object', JSON.stringify({ request: chat('auto'), headers: ['a'] }), 'headers'],
      ['a header value not a string', JSON.stringify({ request: chat('auto'), headers: { 'x-n': 5 } }), 'headers.x-n'],
      ['a template input missing', JSON.stringify({ request: chat('support') }), 'request.inputs.customer'],
    ];
    for (const [name, raw, param] of cases) {
      const r = await post(t.url, { raw });
      expect([name, r.status, code(r), r.json.error.param]).toEqual([name, 400, 'invalid_body', param]);
      expect(r.json.error.type).toBe('error');
    }
  });

  it('64 KiB: exactly 65,536 bytes passes, 65,537 is 400 body_too_large', async () => {
    const ok = await post(t.url, { raw: bodyOfSize(65_536) });
    expect(Buffer.byteLength(bodyOfSize(65_536))).toBe(65_536);
    expect(ok.status).toBe(200);
    const over = await post(t.url, { raw: bodyOfSize(65_537) });
    expect([over.status, code(over)]).toEqual([400, 'body_too_large']);
  });

  it('404 no_route when no rule applies to the organisation and model', async () => {
    for (const model of ['no-such-model', 'secret-alias']) {
      const r = await post(t.url, { body: { request: chat(model) } });
      expect([r.status, r.json]).toEqual([404, { error: { type: 'error', code: 'no_route', message: 'No routing rule applies to this organisation and model.' } }]);
    }
  });
});

describe('the response', () => {
  const [k1, k2, k3] = keys('shape', 3);

  it('carries every contract field (ordered route: no router invoked)', async () => {
    const r = await post(t.url, { key: k1 });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-language')).toBe('en');
    expect(r.json).toEqual({
      dry_run: true,
      strategy_id: 'ordered',
      phase: null,
      weights: null,
      candidates: [
        { provider: 'fake', model: 'f-model', score: 1 },
        { provider: 'mock', model: 'mock-fast', score: 2 / 3 },
        { provider: 'mock', model: 'mock-slow', score: 1 / 3 },
      ],
      filtered: [],
      would_select: { provider: 'fake', model: 'f-model' },
      reason: 'dispatched',
      confidence: null,
      confidence_reason: 'no_router_invoked',
      exploration_rate_effective: 0,
      used_shared_pool_prior: false,
      evidence: null,
      explanation: {
        template_id: 'no_router',
        text: 'Strategy ordered does not score models: the configured order decides, so fake/f-model would be tried first, with 2 fallbacks after it. No router was invoked, so there is no confidence figure.',
      },
    });
  });

  it('a bare catalogue id: the implicit direct rule with one candidate', async () => {
    const r = await post(t.url, { key: k1, body: { request: chat('mock-slow') } });
    expect(r.json).toMatchObject({
      strategy_id: 'direct',
      candidates: [{ provider: 'mock', model: 'mock-slow', score: 1 }],
      would_select: { provider: 'mock', model: 'mock-slow' },
      reason: 'dispatched',
      evidence: null,
      explanation: { template_id: 'single_candidate' },
    });
  });

  it('weighted: repeatable for the same body', async () => {
    const a = await post(t.url, { key: k1, body: { request: chat('coin') } });
    const b = await post(t.url, { key: k1, body: { request: chat('coin') } });
    expect(a.json.strategy_id).toBe('weighted');
    expect(a.json.explanation.template_id).toBe('weighted_draw');
    expect(a.json.candidates.map((c: any) => c.score).sort()).toEqual([0.25, 0.75]);
    expect(b.json).toEqual(a.json);
  });

  it('feedback_driven at day zero: cold start, capped confidence, evidence of nothing', async () => {
    const r = await post(t.url, { key: k1, body: { request: chat('learn') } });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({
      dry_run: true,
      strategy_id: 'feedback_driven',
      phase: 'cold_start',
      weights: { ...t.config.gateway.routing.weights.cold_start },
      would_select: { provider: 'mock', model: 'mock-fast' },
      reason: 'dispatched',
      confidence_reason: 'cap_day0',
      used_shared_pool_prior: false,
      evidence: { samples: 0, top2_score_gap: 0, outcome_variance: 0, recent_regressions: { kind: 'exact', exact: 0 }, last_regression_at: null },
      explanation: { template_id: 'cold_start' },
    });
    expect(r.json.candidates.map((c: any) => typeof c.score)).toEqual(['number', 'number']);
    expect(r.json.confidence).toBeLessThanOrEqual(t.config.gateway.routing.confidence_caps.day0);
    expect(typeof r.json.exploration_rate_effective).toBe('number');
  });

  it('firewall block: 200, a firewall_blocked entry with score 0.0, would_select null, no_enabled_targets; nothing of the prompt echoed', async () => {
    const secret = 'api_key = sk-live-0c2f-SECRET';
    for (const accept of ['en', 'pt']) {
      const r = await post(t.url, { key: k1, body: { request: chat('learn', `my ${secret}`) }, headers: { 'accept-language': accept, 'x-request-id': `req-fw-${accept}` } });
      expect(r.status).toBe(200);
      expect(r.headers.get('content-language')).toBe(accept);
      expect(r.json).toMatchObject({
        dry_run: true,
        candidates: [],
        would_select: null,
        reason: 'no_enabled_targets',
        explanation: { template_id: 'firewall_blocked' },
      });
      expect(r.json.filtered).toContainEqual({ provider: 'mock', model: 'mock-fast', reason: 'firewall_blocked', score: 0 });
      expect(r.text).toContain('"score":0');
      expect(r.text).not.toContain('sk-live-0c2f-SECRET');
    }
    expect(t.logs.join('\n')).not.toContain('sk-live-0c2f-SECRET');
  });

  it('pt and en texts, Content-Language from Accept-Language with q-values, en as fallback', async () => {
    const cases: Array<[string | undefined, string]> = [
      ['pt-BR', 'pt'],
      ['en;q=0.4, pt;q=0.9', 'pt'],
      ['pt;q=0.2, en', 'en'],
      ['fr-FR', 'en'],
      [undefined, 'en'],
    ];
    const texts = new Map<string, string>();
    for (const [accept, locale] of cases) {
      const r = await post(t.url, { key: k2, headers: accept ? { 'accept-language': accept } : {} });
      expect([accept, r.status, r.headers.get('content-language')]).toEqual([accept, 200, locale]);
      expect(r.headers.get('vary')).toMatch(/Accept-Language/i);
      texts.set(locale, r.json.explanation.text);
      expect(r.json.explanation.template_id).toBe('no_router');
    }
    expect(texts.get('pt')).toBe(
      'A estratégia ordered não pontua modelos: a ordem configurada decide, então fake/f-model seria tentado primeiro, com 2 alternativas depois dele. Nenhum roteador foi acionado, então não há valor de confiança.',
    );
    expect(texts.get('en')).toContain('Strategy ordered does not score models');
  });

  it('caps explanation.text at 600 characters', async () => {
    for (const accept of ['en', 'pt']) {
      const r = await post(t.url, { key: k2, body: { request: chat('long') }, headers: { 'accept-language': accept } });
      expect(r.status).toBe(200);
      expect(r.json.candidates[0].model).toHaveLength(700);
      expect(Array.from(r.json.explanation.text as string)).toHaveLength(600);
      expect(TEMPLATE_IDS).toContain(r.json.explanation.template_id);
    }
  });

  it('sanitises headers before the routing chain sees them, and quotes no prompt text in bodies or logs', async () => {
    const routing = t.app.get(RoutingService);
    const spy = jest.spyOn(routing, 'route');
    try {
      const headers = {
        Authorization: `Bearer ${HEADER_MARKER}`,
        COOKIE: `sid=${HEADER_MARKER}`,
        Host: 'evil.example',
        'X-Forwarded-For': '10.0.0.1',
        'x-REAL-ip': '10.0.0.2',
        'X-Real-IP-Chain': '10.0.0.3',
        'x-tenant': 'blue',
        'Gateway-Session-Id': 'sess-42',
      };
      const bodies = [
        { request: chat('auto', `Tell me about ${MARKER}`), headers },
        { request: { ...chat('support', `again ${MARKER}`), inputs: { customer: MARKER } }, headers },
        { request: chat('coin', `${MARKER} ${MARKER}`) },
      ];
      const replies: Reply[] = [];
      for (const [i, body] of bodies.entries()) {
        for (const accept of ['en', 'pt-BR']) {
          replies.push(await post(t.url, { key: k3, body, headers: { 'accept-language': accept, 'x-request-id': `req-marker-${i}-${accept}` } }));
        }
      }
      for (const r of replies) {
        expect(r.status).toBe(200);
        expect(r.text).not.toContain(MARKER);
        expect(r.text).not.toContain(HEADER_MARKER);
        for (const [, v] of r.headers) expect(v).not.toContain(MARKER);
      }
      const seen = spy.mock.calls.map(([input]) => input as RoutingInput);
      expect(seen).toHaveLength(6);
      for (const input of seen.slice(0, 4)) {
        expect(input.mode).toBe('dry-run');
        expect(input.headers).toEqual({ 'x-tenant': 'blue', 'Gateway-Session-Id': 'sess-42' });
        expect(input.sessionId).toBe('sess-42');
        for (const k of Object.keys(input.headers!)) expect(isReservedHeader(k)).toBe(false);
      }
      expect(seen[4].headers).toEqual({});
      // The access lines were written for these requests, and no line anywhere holds the markers.
      expect(t.logs.filter((l) => l.includes('req-marker-')).length).toBeGreaterThanOrEqual(6);
      const all = t.logs.join('\n');
      expect(all).not.toContain(MARKER);
      expect(all).not.toContain(HEADER_MARKER);
    } finally {
      spy.mockRestore();
    }
  });
});

describe('the double rate limit (memory cache store)', () => {
  it('100 concurrent requests on one key: exactly 10 × 200, the rest 429 rate_limited with Retry-After', async () => {
    const [key] = keys('burst', 1);
    const replies = await Promise.all(Array.from({ length: 100 }, () => post(t.url, { key })));
    expect(replies.filter((r) => r.status === 200)).toHaveLength(10);
    const denied = replies.filter((r) => r.status !== 200);
    expect(denied).toHaveLength(90);
    for (const r of denied) {
      expect([r.status, code(r)]).toEqual([429, 'rate_limited']);
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(Number(r.headers.get('retry-after'))).toBeLessThanOrEqual(60);
    }
  });

  it('30 per minute for the organisation across its keys; denied requests spend neither window', async () => {
    const [a, b, c, d, e] = keys('wide', 5);
    // Key a: its 10, then 15 denials by the key window.
    const first = await Promise.all(Array.from({ length: 25 }, () => post(t.url, { key: a })));
    expect(first.filter((r) => r.status === 200)).toHaveLength(10);
    // Had the denials spent the organisation window, it would be full now; 20 more pass on b, c, d.
    const second = await Promise.all([b, c, d].flatMap((k) => Array.from({ length: 10 }, () => post(t.url, { key: k }))));
    expect(second.filter((r) => r.status === 200)).toHaveLength(20);
    // The organisation window is full: a fresh key is refused, with Retry-After.
    const fresh = await post(t.url, { key: e });
    expect([fresh.status, code(fresh)]).toEqual([429, 'rate_limited']);
    expect(fresh.json.error.message).toContain('30 per minute for the organisation');
    expect(Number(fresh.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  });
});

describe('no side effects', () => {
  it('no provider call, no decision trace, no chat rate limit or monthly budget, no counter', async () => {
    const [key] = keys('fx', 1);
    const sql = t.app.get(SqlStore);
    const traces = t.app.get(DecisionTraceWriter);
    const limits = t.app.get(LimitsService);
    const cache = t.app.get(CacheStore);
    const month = new Date().toISOString().slice(0, 7);
    const monthlyKey = `ml:{org:fx}:${month}`;

    // One real chat through the fake upstream first: the fake counts, traces are written, limits are spent.
    const served = await post(t.url, { key, path: '/v1/chat/completions', body: chat('f-model') });
    expect(served.status).toBe(200);
    expect(upstream.requests).toHaveLength(1);
    await traces.flush();
    await limits.flush();
    const traceCount = async () => Number((await sql.query<{ n: string }>('SELECT count(*) AS n FROM decision_traces')).rows[0].n);
    const monthlyRow = async () => (await sql.query<{ count: number }>("SELECT count FROM monthly_usage WHERE org_id = 'fx'")).rows.map((r) => Number(r.count));
    const tracesBefore = await traceCount();
    expect(tracesBefore).toBeGreaterThanOrEqual(1);
    expect(await cache.get(monthlyKey)).toBe('1');
    expect(await monthlyRow()).toEqual([1]);
    const countersBefore = await counters(t.url);
    expect([...countersBefore.keys()].some((k) => k.startsWith('gateway_upstream_attempts_total'))).toBe(true);

    // Ten explains (the key's whole budget, and one over it) of the route whose first target is the fake.
    const replies: Reply[] = [];
    for (let i = 0; i < 11; i++) replies.push(await post(t.url, { key, body: { request: chat('auto', 'explain me') } }));
    expect(replies.slice(0, 10).map(statusCode)).toEqual(Array(10).fill('200'));
    expect(statusCode(replies[10])).toBe('429 rate_limited');
    expect(replies[0].json.would_select).toEqual({ provider: 'fake', model: 'f-model' });

    await traces.flush();
    await limits.flush();
    expect(upstream.requests).toHaveLength(1);
    expect(await traceCount()).toBe(tracesBefore);
    expect(await cache.get(monthlyKey)).toBe('1');
    expect(await monthlyRow()).toEqual([1]);
    expect(await counters(t.url)).toEqual(countersBefore);

    // The chat rate limit (3/min per key here) still has its 2 remaining requests: explain spent none of it.
    const chats = [];
    for (let i = 0; i < 3; i++) chats.push(statusCode(await post(t.url, { key, path: '/v1/chat/completions', body: chat('mock-fast') })));
    expect(chats).toEqual(['200', '200', '429 rate_limited']);
    expect(await cache.get(monthlyKey)).toBe('3');
  });
});

describe('Redis unreachable', () => {
  let down: TestApp;
  beforeAll(async () => {
    down = await startTestApp({ yaml: yaml(upstream.url), env: { REDIS_URL: `redis://127.0.0.1:${await closedPort()}` } });
  });
  afterAll(() => down.close());

  it('fails closed: 503 internal, never unlimited', async () => {
    const replies = await Promise.all(Array.from({ length: 15 }, () => post(down.url)));
    for (const r of replies) {
      expect(r.status).toBe(503);
      expect(r.json).toEqual({ error: { type: 'error', code: 'internal', message: expect.any(String) } });
    }
    // Validation still answers first; the rate limiter is only reached by a valid body.
    expect(statusCode(await post(down.url, { raw: '{' }))).toBe('400 invalid_body');
  });
});

describeWithRedis('the double rate limit on real Redis', () => {
  let r: TestApp;
  // Windows outlive a run on a shared server: each run uses its own organisations.
  const run = `r${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
  const org = (name: string) => `${name}-${run}`;
  beforeAll(async () => {
    r = await startTestApp({ yaml: yaml(upstream.url, org), env: { REDIS_URL: TEST_REDIS_URL! } });
    expect(r.app.get(CacheStore).kind).toBe('redis');
  });
  afterAll(() => r.close());

  it('100 concurrent requests on one key: exactly 10 × 200', async () => {
    const [key] = keys(org('burst'), 1);
    const replies = await Promise.all(Array.from({ length: 100 }, () => post(r.url, { key })));
    expect(replies.filter((x) => x.status === 200)).toHaveLength(10);
    for (const x of replies.filter((y) => y.status !== 200)) {
      expect([x.status, code(x)]).toEqual([429, 'rate_limited']);
      expect(Number(x.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    }
  });

  it('30 per minute across the keys of one organisation; denied requests spend neither window', async () => {
    const [a, b, c, d, e] = keys(org('wide'), 5);
    const first = await Promise.all(Array.from({ length: 25 }, () => post(r.url, { key: a })));
    expect(first.filter((x) => x.status === 200)).toHaveLength(10);
    const second = await Promise.all([b, c, d].flatMap((k) => Array.from({ length: 10 }, () => post(r.url, { key: k }))));
    expect(second.filter((x) => x.status === 200)).toHaveLength(20);
    expect(statusCode(await post(r.url, { key: e }))).toBe('429 rate_limited');
    // Both windows live under the organisation's hash tag and hold exactly the spent hits.
    const cache = r.app.get(CacheStore);
    const probe = await cache.hitWindows([
      { key: `explain:{org:${org('wide')}}:org`, limit: 0, windowMs: 60_000 },
      { key: `explain:{org:${org('wide')}}:key:${org('wide')}-1`, limit: 0, windowMs: 60_000 },
    ]);
    expect([probe.allowed, probe.counts]).toEqual([false, [30, 10]]);
  });
});
