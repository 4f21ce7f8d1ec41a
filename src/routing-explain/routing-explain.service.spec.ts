import { memoryLogger, UnusedSql } from '../../test/support/kit';
import { GatewayError } from '../common/errors/gateway-error';
import type { Caller } from '../common/http/request-context';
import { AppConfig } from '../config/app-config';
import { loadEnv } from '../config/env';
import { loadGatewayConfig } from '../config/gateway-config';
import { explainWindows, LimitsService } from '../limits/limits.service';
import { MonthlyUsageRepository } from '../limits/monthly-usage.repository';
import { MetricsService } from '../metrics/metrics.service';
import { StoreFallback } from '../resilience/store-fallback';
import { NO_ROUTER, RoutingService } from '../routing/routing.service';
import type { RoutingDecision, RoutingInput } from '../routing/routing.types';
import { CacheStore, WindowCheck, WindowDecision } from '../stores/cache/cache-store';
import { MemoryCacheStore } from '../stores/cache/memory-cache.store';
import { ExplainQuery, RoutingExplainService } from './routing-explain.service';

const caller = (keyId = 'acme-rw', orgId = 'acme'): Caller => ({
  orgId,
  keyId,
  plan: 'pro',
  features: ['explain', 'feedback_routing'],
  permissions: ['read', 'write'],
  killSwitches: [],
  monthlyRequestLimit: null,
});

const body = (over: Record<string, unknown> = {}) => ({ request: { model: 'auto', messages: [{ role: 'user', content: 'hi' }] }, ...over });
const query = (c: Caller, b: unknown = body(), acceptLanguage?: string): ExplainQuery => ({ caller: c, body: b, acceptLanguage, requestId: 'req-1' });

/** A routing chain that records what it was given and answers one fixed ordered decision (fakes over mocks). */
class FakeRouting extends RoutingService {
  inputs: RoutingInput[] = [];
  fail?: GatewayError;
  override route(input: RoutingInput): RoutingDecision {
    this.inputs.push(input);
    if (this.fail) throw this.fail;
    return {
      requestedModel: input.model,
      rule: { name: 'default', implicit: false },
      strategyId: 'ordered',
      candidates: [{ provider: 'mock', model: 'mock-fast', score: null }],
      filtered: [],
      plan: [{ provider: 'mock', model: 'mock-fast' }],
      messages: input.messages,
      insight: { ...NO_ROUTER },
    };
  }
}

/** A cache store that is down: every call rejects, as an unreachable Redis does. */
class DownCacheStore extends MemoryCacheStore {
  override async hitWindows(_: readonly WindowCheck[]): Promise<WindowDecision> {
    throw new Error('Connection is closed.');
  }
}

const limiters: LimitsService[] = [];
afterEach(async () => {
  for (const l of limiters.splice(0)) await l.beforeApplicationShutdown();
});

function setup(opts: { limits?: string; cache?: CacheStore; now?: () => number } = {}) {
  const config = new AppConfig(loadEnv({}), loadGatewayConfig(opts.limits ? `limits: ${opts.limits}\n` : '', {}));
  const cache = opts.cache ?? new MemoryCacheStore({ now: opts.now });
  const routing = new FakeRouting(config);
  const { logger, lines } = memoryLogger();
  const metrics = new MetricsService();
  // The real limiter explain spends (LimitsService.checkExplain); the analytics store is never reached.
  const limits = new LimitsService(cache, new MonthlyUsageRepository(new UnusedSql()), metrics, logger, new StoreFallback(metrics, logger), config);
  limiters.push(limits);
  const service = new RoutingExplainService(routing, limits);
  return { service, routing, cache, lines, metrics };
}

async function outcome(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return '200';
  } catch (err) {
    if (!(err instanceof GatewayError)) throw err;
    return `${err.status} ${err.code}`;
  }
}

describe('RoutingExplainService: the double rate limit', () => {
  it('keys of one call share the organisation hash tag', () => {
    const checks = explainWindows(caller('k1', 'acme'), { perOrg: 30, perKey: 10 });
    expect(checks).toEqual([
      { key: 'explain:{org:acme}:org', limit: 30, windowMs: 60_000 },
      { key: 'explain:{org:acme}:key:k1', limit: 10, windowMs: 60_000 },
    ]);
  });

  it('100 concurrent requests on one key: exactly 10 pass, 90 are 429 with Retry-After', async () => {
    const { service, routing } = setup();
    const results = await Promise.allSettled(Array.from({ length: 100 }, () => service.explain(query(caller()))));
    const ok = results.filter((r) => r.status === 'fulfilled');
    const denied = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason as GatewayError);
    expect(ok).toHaveLength(10);
    expect(denied).toHaveLength(90);
    for (const e of denied) {
      expect([e.status, e.code]).toEqual([429, 'rate_limited']);
      expect(Number(e.headers!['Retry-After'])).toBeGreaterThanOrEqual(1);
      expect(Number(e.headers!['Retry-After'])).toBeLessThanOrEqual(60);
      expect(e.message).toContain('10 per minute for this API key');
    }
    // A denied request never reached the routing chain.
    expect(routing.inputs).toHaveLength(10);
  });

  it('30 per minute across the keys of one organisation; another organisation is unaffected', async () => {
    const { service } = setup();
    const keys = ['k1', 'k2', 'k3', 'k4'];
    let passed = 0;
    for (let round = 0; round < 10; round++) {
      for (const k of keys) if ((await outcome(service.explain(query(caller(k))))) === '200') passed++;
    }
    expect(passed).toBe(30);
    const fresh = await service.explain(query(caller('k5'))).catch((e: GatewayError) => e);
    expect(fresh).toBeInstanceOf(GatewayError);
    expect((fresh as GatewayError).message).toContain('30 per minute for the organisation');
    expect(await outcome(service.explain(query(caller('k1', 'other'))))).toBe('200');
  });

  it('a request denied by one window spends neither', async () => {
    let now = 1_000_000;
    const { service } = setup({ now: () => now });
    // Key A fills its own window (10); 20 more on A are denied by the key window.
    for (let i = 0; i < 10; i++) expect(await outcome(service.explain(query(caller('A'))))).toBe('200');
    for (let i = 0; i < 20; i++) expect(await outcome(service.explain(query(caller('A'))))).toBe('429 rate_limited');
    // Had they spent the organisation window it would be full; it holds exactly 10, so 20 more pass on other keys.
    let passed = 0;
    for (const k of ['B', 'C', 'D']) for (let i = 0; i < 10; i++) if ((await outcome(service.explain(query(caller(k))))) === '200') passed++;
    expect(passed).toBe(20);

    // Now the organisation window is full: key E is denied 5 times, half a window later.
    now += 30_000;
    for (let i = 0; i < 5; i++) expect(await outcome(service.explain(query(caller('E'))))).toBe('429 rate_limited');
    // Once the first hits leave the window, E has its whole 10: the denials spent nothing of its window.
    now += 30_001;
    let e = 0;
    for (let i = 0; i < 12; i++) if ((await outcome(service.explain(query(caller('E'))))) === '200') e++;
    expect(e).toBe(10);
  });

  it('honours the configured limits', async () => {
    const { service } = setup({ limits: '{ explain_per_minute_per_org: 4, explain_per_minute_per_key: 3 }' });
    const a = await Promise.all(Array.from({ length: 5 }, () => outcome(service.explain(query(caller('a'))))));
    expect(a.filter((o) => o === '200')).toHaveLength(3);
    const b = await Promise.all(Array.from({ length: 3 }, () => outcome(service.explain(query(caller('b'))))));
    expect(b.filter((o) => o === '200')).toHaveLength(1);
  });

  it('cache store down: 503 internal (fails closed), the routing chain is not run, logged once, counted', async () => {
    const { service, routing, lines, metrics } = setup({ cache: new DownCacheStore() });
    for (let i = 0; i < 3; i++) {
      const err = (await service.explain(query(caller())).catch((e) => e)) as GatewayError;
      expect(err).toBeInstanceOf(GatewayError);
      expect([err.status, err.code]).toEqual([503, 'internal']);
    }
    expect(routing.inputs).toHaveLength(0);
    expect(lines.filter((l) => l.topic === 'cache-store:explain-limit')).toHaveLength(1);
    expect((await metrics.storeErrors.get()).values.find((v) => v.labels.store === 'cache')?.value).toBe(3);
  });
});

describe('RoutingExplainService: validation, routing input and error mapping', () => {
  it('an invalid body is 400 invalid_body and spends nothing', async () => {
    const { service } = setup({ limits: '{ explain_per_minute_per_key: 1 }' });
    for (const b of [{ request: {} }, { ...body(), extra: 1 }, { ...body(), headers: { a: 2 } }]) {
      expect(await outcome(service.explain(query(caller(), b)))).toBe('400 invalid_body');
    }
    expect(await outcome(service.explain(query(caller())))).toBe('200');
  });

  it('hands the routing chain the sanitised headers, in dry-run mode', async () => {
    const { service, routing } = setup();
    await service.explain(query(caller(), body({ headers: { Authorization: 'Bearer x', COOKIE: 'c', 'X-Forwarded-Host': 'h', 'x-tenant': 't', 'Gateway-Session-Id': 's-1' } })));
    expect(routing.inputs[0]).toMatchObject({ mode: 'dry-run', model: 'auto', headers: { 'x-tenant': 't', 'Gateway-Session-Id': 's-1' }, sessionId: 's-1' });
    expect(Object.keys(routing.inputs[0].headers!)).toEqual(['x-tenant', 'Gateway-Session-Id']);
  });

  it('passes max_completion_tokens (or the legacy max_tokens) for cost estimates, as chat does', async () => {
    const { service, routing } = setup();
    await service.explain(query(caller(), { request: { model: 'auto', messages: [{ role: 'user', content: 'x' }], max_tokens: 77 } }));
    expect(routing.inputs[0].maxCompletionTokens).toBe(77);
  });

  it('draws deterministically: the same body gives the same draws', async () => {
    const { service, routing } = setup();
    await service.explain(query(caller()));
    await service.explain(query(caller()));
    const [a, b] = routing.inputs.map((i) => [i.random!(), i.random!(), i.random!()]);
    expect(a).toEqual(b);
    for (const x of a) expect(x >= 0 && x < 1).toBe(true);
  });

  it('no rule: 404 no_route, without echoing the model', async () => {
    const { service, routing } = setup();
    routing.fail = new GatewayError('model_not_found', 'The model "secret-model-name" does not exist or no route serves it.', { param: 'model' });
    const err = (await service.explain(query(caller())).catch((e) => e)) as GatewayError;
    expect([err.status, err.code, err.message]).toEqual([404, 'no_route', 'No routing rule applies to this organisation and model.']);
  });

  it("the routing chain's request errors become invalid_body under request.", async () => {
    const { service, routing } = setup();
    routing.fail = new GatewayError('invalid_request', 'model must not contain empty entries.', { param: 'model' });
    const a = (await service.explain(query(caller())).catch((e) => e)) as GatewayError;
    expect([a.status, a.code, a.param]).toEqual([400, 'invalid_body', 'request.model']);
    routing.fail = new GatewayError('missing_template_input', 'A template variable has no value in inputs.');
    const b = (await service.explain(query(caller())).catch((e) => e)) as GatewayError;
    expect([b.status, b.code, b.param]).toEqual([400, 'invalid_body', 'request.inputs']);
  });

  it('resolves the locale from Accept-Language', async () => {
    const { service } = setup();
    expect((await service.explain(query(caller(), body(), 'pt-BR,en;q=0.5'))).locale).toBe('pt');
    expect((await service.explain(query(caller(), body(), 'de'))).locale).toBe('en');
    expect((await service.explain(query(caller(), body()))).locale).toBe('en');
  });
});
