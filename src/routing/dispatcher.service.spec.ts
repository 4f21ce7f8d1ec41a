import { OpenAiFake } from '../../test/fakes/openai-fake';
import { makeConfig, silentLogger } from '../../test/support/kit';
import { MetricsService } from '../metrics/metrics.service';
import { CircuitBreakerOptions, CircuitBreakerService } from '../resilience/circuit-breaker/circuit-breaker.service';
import { StoreFallback } from '../resilience/store-fallback';
import type { ChatRequest } from '../providers/provider-adapter';
import { ProviderRegistry } from '../providers/provider-registry';
import { MemoryCacheStore } from '../stores/cache/memory-cache.store';
import { ClientGoneError, DispatchError, DispatcherService } from './dispatcher.service';

const T0 = 1_750_000_000_000;
const REQ: ChatRequest = { messages: [{ role: 'user', content: 'Say hello.' }] };
const REF = { provider: 'up', model: 'm' };

/** The dispatcher with the real registry, adapters and breakers on `store`, for this gateway YAML; `close` ends them all. */
function makeDispatcher(yaml: string, store: MemoryCacheStore, breakerOptions?: CircuitBreakerOptions) {
  const config = makeConfig(yaml);
  const metrics = new MetricsService();
  const registry = new ProviderRegistry(config);
  const logger = silentLogger();
  const breakers = new CircuitBreakerService(store, metrics, logger, new StoreFallback(metrics, logger), config, breakerOptions);
  const close = async () => {
    registry.onApplicationShutdown();
    await breakers.onModuleDestroy();
    await store.close();
  };
  return { breakers, dispatcher: new DispatcherService(registry, breakers, metrics), close };
}

/** The dispatcher with the real registry, adapter and breakers (memory store, one moved clock), against an OpenAI-shaped fake. */
describe('DispatcherService and the half-open probe', () => {
  let fake: OpenAiFake;
  let clock: { t: number };
  let breakers: CircuitBreakerService;
  let dispatcher: DispatcherService;
  let close: () => Promise<void>;

  beforeEach(async () => {
    fake = await new OpenAiFake().start();
    clock = { t: T0 };
    // random 0.5: no jitter, so the first open time is exactly 5 s; the probe lease is the default 60 s.
    ({ breakers, dispatcher, close } = makeDispatcher(
      `providers:\n  up: { family: openai, base_url: "${fake.url}", api_key: sk-test }\nmodels:\n  m: { provider: up, type: chat }\n`,
      new MemoryCacheStore({ now: () => clock.t }),
      { random: () => 0.5, now: () => clock.t },
    ));
  });
  afterEach(async () => {
    await close();
    await fake.stop();
  });

  const chat = (signal: AbortSignal) => dispatcher.run([REF], signal, () => undefined, (adapter, target) => adapter.chat(REQ, { target, signal, requestId: 'req-dispatch' }));

  async function openBreaker(): Promise<void> {
    fake.always({ errorStatus: 503 });
    for (let i = 0; i < 5; i++) await expect(chat(new AbortController().signal)).rejects.toMatchObject({ code: 'upstream_error' });
    fake.reset();
    expect((await breakers.states()).up.state).toBe('open');
  }

  it('a probe whose client goes away gives its lease back: the next request probes at once, and nothing was counted', async () => {
    await openBreaker();
    clock.t += 5_000;
    const before = (await breakers.states()).up;
    expect(before.state).toBe('half_open');

    fake.next({ stallBeforeHeadersMs: 300 });
    const ac = new AbortController();
    const probe = chat(ac.signal);
    setTimeout(() => ac.abort(), 50);
    await expect(probe).rejects.toBeInstanceOf(ClientGoneError);
    // Neither a success (it would have closed) nor a failure (it would have re-opened).
    expect((await breakers.states()).up).toEqual(before);

    // Well inside the 60 s lease: without the release this request would find no probe to take.
    clock.t += 1;
    fake.next({});
    const served = await chat(new AbortController().signal);
    expect(served.attempts).toBe(1);
    expect((await breakers.states()).up).toEqual({ state: 'closed', consecutiveFailures: 0 });
  });

  it('a probe that fails still re-opens the breaker, and an abort on a closed breaker records nothing', async () => {
    fake.next({ stallBeforeHeadersMs: 300 });
    const ac = new AbortController();
    const aborted = chat(ac.signal);
    setTimeout(() => ac.abort(), 50);
    await expect(aborted).rejects.toBeInstanceOf(ClientGoneError);
    expect((await breakers.states()).up).toEqual({ state: 'closed', consecutiveFailures: 0 });

    await openBreaker();
    clock.t += 5_000;
    fake.next({ errorStatus: 503 });
    await expect(chat(new AbortController().signal)).rejects.toMatchObject({ code: 'upstream_error' });
    expect((await breakers.states()).up.state).toBe('open');
    await expect(chat(new AbortController().signal)).rejects.toMatchObject({ code: 'providers_unavailable' });
  });

  it('every breaker open: Retry-After counts down to the end of the open period; a half-open one whose probe is out says 1', async () => {
    await openBreaker();
    clock.t += 1_200; // 3.8 s of the 5 s open period left
    await expect(chat(new AbortController().signal)).rejects.toMatchObject({ code: 'providers_unavailable', headers: { 'Retry-After': '4' } });
    clock.t += 3_750; // 50 ms left: rounded up, never 0
    await expect(chat(new AbortController().signal)).rejects.toMatchObject({ code: 'providers_unavailable', headers: { 'Retry-After': '1' } });

    clock.t += 50;
    fake.next({ stallBeforeHeadersMs: 300 });
    const probe = chat(new AbortController().signal); // takes the probe lease and holds it
    await new Promise((r) => setTimeout(r, 50));
    await expect(chat(new AbortController().signal)).rejects.toMatchObject({ code: 'providers_unavailable', headers: { 'Retry-After': '1' } });
    await expect(probe).resolves.toMatchObject({ attempts: 1 });
  });

  it("a probe that fails on our side (not the provider's) gives its lease back and counts nothing", async () => {
    await openBreaker();
    clock.t += 5_000;
    const before = (await breakers.states()).up;
    const bug = new Error('a bug of ours while handling the answer');
    await expect(
      dispatcher.run([REF], new AbortController().signal, () => undefined, () => Promise.reject(bug)),
    ).rejects.toBe(bug);
    expect((await breakers.states()).up).toEqual(before);
    fake.next({});
    await expect(chat(new AbortController().signal)).resolves.toMatchObject({ attempts: 1 });
    expect((await breakers.states()).up).toEqual({ state: 'closed', consecutiveFailures: 0 });
  });
});

/**
 * The failed attempts dispatch reports (README "Feedback and the learning loop"): what the trace
 * records so the learning loop counts a target that failed and was rescued by the next one.
 */
describe('DispatcherService: the attempts that failed', () => {
  let flaky: OpenAiFake;
  let steady: OpenAiFake;
  let dispatcher: DispatcherService;
  let close: () => Promise<void>;

  const FLAKY = { provider: 'flaky', model: 'f' };
  const SLOW = { provider: 'slow', model: 'w' };
  const GONE = { provider: 'gone', model: 'g' };
  const STEADY = { provider: 'steady', model: 's' };

  beforeEach(async () => {
    flaky = await new OpenAiFake().start();
    steady = await new OpenAiFake().start();
    // `gone` points at a port nothing listens on (a network failure); `slow` gives up after 100 ms.
    ({ dispatcher, close } = makeDispatcher(
      `providers:
  flaky: { family: openai, base_url: "${flaky.url}", api_key: sk-test }
  slow: { family: openai, base_url: "${flaky.url}", api_key: sk-test, timeouts: { total_ms: 100 } }
  gone: { family: openai, base_url: "http://127.0.0.1:1", api_key: sk-test }
  steady: { family: openai, base_url: "${steady.url}", api_key: sk-test }
models:
  f: { provider: flaky, type: chat }
  w: { provider: slow, type: chat }
  g: { provider: gone, type: chat }
  s: { provider: steady, type: chat }
`,
      new MemoryCacheStore(),
    ));
  });
  afterEach(async () => {
    await close();
    await flaky.stop();
    await steady.stop();
  });

  const chat = (plan: Array<{ provider: string; model: string }>, signal = new AbortController().signal) =>
    dispatcher.run(plan, signal, () => undefined, (adapter, target) => adapter.chat(REQ, { target, signal, requestId: 'req-failed-attempts' }));

  it('a served request lists the calls that failed before it, in order: kind and status, no upstream text', async () => {
    flaky.next({ errorStatus: 503 }, { stallBeforeHeadersMs: 500 });
    steady.next({});
    const served = await chat([FLAKY, GONE, SLOW, STEADY]);
    expect(served).toMatchObject({ target: STEADY, attempts: 4, fallbackUsed: true });
    expect(served.failedAttempts).toEqual([
      { ...FLAKY, error: 'status', status: 503 },
      { ...GONE, error: 'network', status: null },
      { ...SLOW, error: 'timeout', status: null },
    ]);

    steady.next({});
    await expect(chat([STEADY])).resolves.toMatchObject({ attempts: 1, fallbackUsed: false, failedAttempts: [] });
  });

  it('every target failed: the error carries every failed call, the last one included', async () => {
    flaky.next({ errorStatus: 429 });
    steady.next({ errorStatus: 500 });
    const err = await chat([FLAKY, STEADY]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DispatchError);
    expect(err).toMatchObject({ code: 'upstream_error', status: 502, attempts: 2 });
    expect((err as DispatchError).failedAttempts).toEqual([
      { ...FLAKY, error: 'status', status: 429 },
      { ...STEADY, error: 'status', status: 500 },
    ]);
  });

  it('a target that rejects the request (its fault, not the provider\'s) is not listed; those that failed before it are', async () => {
    flaky.next({ errorStatus: 503 });
    steady.next({ errorStatus: 400 });
    const err = await chat([FLAKY, STEADY]).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'upstream_invalid_request', attempts: 2, failedAttempts: [{ ...FLAKY, error: 'status', status: 503 }] });
  });

  it('a client that goes away is no failure of the provider it was waiting on; earlier failures still ride on the error', async () => {
    flaky.next({ errorStatus: 503 });
    steady.next({ stallBeforeHeadersMs: 300 });
    const ac = new AbortController();
    const pending = chat([FLAKY, STEADY], ac.signal);
    setTimeout(() => ac.abort(), 50);
    const err = await pending.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ClientGoneError);
    expect((err as ClientGoneError).failedAttempts).toEqual([{ ...FLAKY, error: 'status', status: 503 }]);
    expect((err as ClientGoneError).attempts).toBe(2);
  });
});
