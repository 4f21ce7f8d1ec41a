import OpenAI from 'openai';
import { CircuitBreakerOptions, CircuitBreakerService } from '../src/resilience/circuit-breaker/circuit-breaker.service';
import { CacheStore } from '../src/stores/cache/cache-store';
import { OpenAiFake } from './fakes/openai-fake';
import { startTestApp, TestApp } from './support/app';
import { describeWithRedis, TEST_REDIS_URL } from './support/real-servers';

/**
 * Step 4 of docs/architecture.md "The routing chain" end to end: candidates are the route's targets minus those whose breaker is
 * open. Once real upstream failures open a provider's breaker, chat no longer calls it and is served
 * by the next target, explain lists it as `breaker_open`, and a model whose every target is open is
 * 503 `providers_unavailable` with Retry-After, no upstream called. With two replicas on
 * one Redis, the replica that did not see the failures learns of the open breaker on its refresh beat.
 */
const yaml = (o: { flaky: string; steady: string; flakyUrl: string; steadyUrl: string; org: string; key: string; refreshSeconds?: number }) => `
providers:
  ${o.flaky}: { family: openai, base_url: "${o.flakyUrl}", api_key: "sk-flaky" }
  ${o.steady}: { family: openai, base_url: "${o.steadyUrl}", api_key: "sk-steady" }
models:
  f: { provider: ${o.flaky}, upstream: flaky-upstream }
  s: { provider: ${o.steady}, upstream: steady-upstream }
routes:
  - { name: main, models: [auto], strategy: ordered, targets: [${o.flaky}/f, ${o.steady}/s] }
organizations:
  ${o.org}:
    plan: pro
    features: [has_test_ab, feedback_routing, explain]
    api_keys: [ { id: ${o.org}-rw, key: "${o.key}", permissions: [read, write] } ]
${o.refreshSeconds === undefined ? '' : `breakers: { refresh_seconds: ${o.refreshSeconds} }\n`}`;

const flaky = new OpenAiFake({ variant: 'openai' });
const steady = new OpenAiFake({ variant: 'openai' });

beforeAll(async () => {
  await flaky.start();
  await steady.start();
});
afterAll(async () => {
  await flaky.stop();
  await steady.stop();
});

/**
 * The breakers stay open 60 s, without jitter: the default 5 s ± 20 % could end mid-suite on a loaded
 * machine, and the half-open probe would then reach the flaky fake.
 */
const LONG_OPEN_MS = 60_000;
const overrides = [{ provide: CircuitBreakerOptions, useValue: { baseOpenMs: LONG_OPEN_MS, maxOpenMs: LONG_OPEN_MS, jitter: 0 } }];

const client = (t: TestApp, key: string) => new OpenAI({ apiKey: key, baseURL: `${t.url}/v1`, maxRetries: 0 });
const ask = (c: OpenAI, model: string) => c.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }] }).withResponse();

async function explain(t: TestApp, key: string, model: string): Promise<{ status: number; body: any }> {
  const r = await fetch(`${t.url}/v1/routing/explain`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ request: { model, messages: [{ role: 'user', content: 'x' }] } }),
  });
  return { status: r.status, body: await r.json() };
}

/** Five failures through chat: each is served by the steady target, and the fifth opens the flaky provider's breaker. */
async function openFlakyBreaker(c: OpenAI): Promise<void> {
  flaky.always({ errorStatus: 503 });
  steady.always({ text: 'steady answer' });
  for (let i = 0; i < 5; i++) {
    const { data, response } = await ask(c, 'auto');
    expect([data.model, response.headers.get('gateway-fallback-used')]).toEqual(['s', 'true']);
  }
  expect(flaky.requests).toHaveLength(5);
}

describe('open breakers leave the candidates (one replica, in-process store)', () => {
  const KEY = 'gw-breaker-routing-rw';
  let t: TestApp;
  let c: OpenAI;

  beforeAll(async () => {
    flaky.reset();
    steady.reset();
    t = await startTestApp({ yaml: yaml({ flaky: 'flaky', steady: 'steady', flakyUrl: flaky.url, steadyUrl: steady.url, org: 'acme', key: KEY }), overrides });
    c = client(t, KEY);
    await openFlakyBreaker(c);
  });
  afterAll(() => t.close());

  it('the next requests never call the open provider and are served by the next target, flagged as a fallback', async () => {
    for (const stream of [false, true]) {
      const steadyBefore = steady.requests.length;
      const { response } = await c.chat.completions.create({ model: 'auto', stream, messages: [{ role: 'user', content: 'x' }] } as OpenAI.ChatCompletionCreateParams).withResponse();
      expect([response.status, response.headers.get('gateway-provider'), response.headers.get('gateway-model'), response.headers.get('gateway-fallback-used')]).toEqual([
        200,
        'steady',
        's',
        'true',
      ]);
      if (stream) await response.text();
      expect(steady.requests.length).toBe(steadyBefore + 1);
    }
    expect(flaky.requests).toHaveLength(5);
  });

  it('explain lists the open provider as filtered breaker_open and would select the next target', async () => {
    const r = await explain(t, KEY, 'auto');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      filtered: [{ provider: 'flaky', model: 'f', reason: 'breaker_open', score: 0 }],
      candidates: [{ provider: 'steady', model: 's', score: 1 }],
      would_select: { provider: 'steady', model: 's' },
      reason: 'dispatched',
    });
  });

  it('every target open: chat is 503 providers_unavailable with Retry-After and the contract body, no upstream called; explain is exhausted', async () => {
    for (const stream of [false, true]) {
      const err = await c.chat.completions.create({ model: 'f', stream, messages: [{ role: 'user', content: 'x' }] } as OpenAI.ChatCompletionCreateParams).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.APIError);
      const e = err as InstanceType<typeof OpenAI.APIError>;
      expect(e.status).toBe(503);
      expect(e.error).toEqual({ type: 'error', code: 'providers_unavailable', message: expect.any(String) });
      // Retry-After counts down to the end of the (60 s) open period, rounded up.
      const retryAfter = Number(e.headers?.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(30);
      expect(retryAfter).toBeLessThanOrEqual(LONG_OPEN_MS / 1000);
    }
    expect(flaky.requests).toHaveLength(5);

    const r = await explain(t, KEY, 'f');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      candidates: [],
      filtered: [{ provider: 'flaky', model: 'f', reason: 'breaker_open', score: 0 }],
      would_select: null,
      reason: 'exhausted',
      explanation: { template_id: 'exhausted' },
    });
  });
});

describeWithRedis('a breaker one replica opened, seen by another through Redis', () => {
  // Breaker keys outlive a run on a shared server: each run uses its own provider ids and organisation.
  const run = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
  const names = { flaky: `flaky-${run}`, steady: `steady-${run}`, org: `org-${run}`, key: `gw-breaker-${run}` };
  let a: TestApp;
  let b: TestApp;

  beforeAll(async () => {
    flaky.reset();
    steady.reset();
    const config = yaml({ ...names, flakyUrl: flaky.url, steadyUrl: steady.url, refreshSeconds: 0.1 });
    a = await startTestApp({ yaml: config, env: { REDIS_URL: TEST_REDIS_URL! }, overrides });
    b = await startTestApp({ yaml: config, env: { REDIS_URL: TEST_REDIS_URL! }, overrides });
    expect([a.app.get(CacheStore).kind, b.app.get(CacheStore).kind]).toEqual(['redis', 'redis']);
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
  });

  it("B's explain shows breaker_open after its refresh beat, and B's chat no longer calls the provider", async () => {
    expect((await explain(b, names.key, 'auto')).body.filtered).toEqual([]);
    await openFlakyBreaker(client(a, names.key));

    // B made no breaker step for the provider: only the beat (every 0.1 s here) can tell it. Wait for
    // B's view (polling explain itself would run into its 10-per-minute key limit), then ask explain once.
    const view = b.app.get(CircuitBreakerService);
    const deadline = Date.now() + 5_000;
    while (view.openForMs(names.flaky) === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const seen = (await explain(b, names.key, 'auto')).body;
    expect(seen).toMatchObject({ filtered: [{ provider: names.flaky, model: 'f', reason: 'breaker_open', score: 0 }], would_select: { provider: names.steady, model: 's' } });

    const { data, response } = await ask(client(b, names.key), 'auto');
    expect([data.model, response.headers.get('gateway-fallback-used')]).toEqual(['s', 'true']);
    expect(flaky.requests).toHaveLength(5);
  });
});
