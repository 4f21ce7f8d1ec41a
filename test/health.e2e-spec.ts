/**
 * Health endpoints (docs/api.md "Health"; docs/architecture.md "Degrade, never hang"): public, no secrets,
 * each store up and down for real — a stopped Redis, a closed port, a Redis that never answers, a
 * Postgres stopped mid-run — answered within a bound and without crashing the process.
 */
import { CacheStore } from '../src/stores/cache/cache-store';
import { VectorStore } from '../src/stores/vector/vector-store';
import { PRO_KEY, READ_ONLY_KEY, startTestApp, TestApp } from './support/app';
import { createTestDatabase, TestDatabase } from './support/postgres';
import { readReply } from './support/http-check';
import { ProbeController } from './support/probe.controller';
import { silentServer } from './support/kit';
import { describeWithPostgres, describeWithRedis, TEST_REDIS_URL } from './support/real-servers';

interface ThrowawayServer {
  url: string;
  stop(): void;
}
interface TestServers {
  startPostgres(): Promise<ThrowawayServer | { skipped: string }>;
  startRedis(): Promise<ThrowawayServer | { skipped: string }>;
  freePort(): Promise<number>;
}
// Plain JS shared with scripts/test.js; typed here.
const servers = require('../scripts/test-servers') as TestServers;

/** Starts a throwaway server; its binaries exist wherever the describeWith… gate let us in. */
async function throwaway(start: () => Promise<ThrowawayServer | { skipped: string }>): Promise<ThrowawayServer> {
  const s = await start();
  if ('skipped' in s) throw new Error(`cannot start a throwaway server: ${s.skipped}`);
  return s;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
/** Longer than the readiness cache (~1.5 s), so the next readiness call probes again. */
const PAST_READY_CACHE_MS = 1_700;
/** "Answers within ~2 s": the probes' own timeout is 1 s. */
const ANSWER_BOUND_MS = 2_000;

interface Reply {
  status: number;
  text: string;
  json: any;
  ms: number;
}

async function get(url: string, headers: Record<string, string> = {}): Promise<Reply> {
  const started = performance.now();
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(10_000) });
  const { status, text, json } = await readReply(res);
  return { status, text, json, ms: performance.now() - started };
}

/** Polls `fn` until it stops throwing, or rethrows after `ms`. */
async function eventually<T>(fn: () => Promise<T>, ms: number): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(100);
    }
  }
}

/** A TCP port nothing listens on: bound, then released. */
const closedPort = () => servers.freePort();

describe('health on the embedded default', () => {
  const PROVIDER_SECRET = 'sk-planted-provider-secret-4f1c9e';
  const HEADER_SECRET = 'planted-header-secret-77ab';
  const ORG_KEY = 'gw-planted-org-key-9a7e31';
  const YAML = `
providers:
  mock: { family: mock }
  openai: { family: openai, base_url: "https://api.openai.com/v1", api_key: "${PROVIDER_SECRET}", headers: { x-extra: "${HEADER_SECRET}" } }
models:
  mock-fast: { provider: mock, type: chat }
  gpt-4o-mini: { provider: openai, type: chat }
routes:
  - { name: default, models: [auto], targets: [mock/mock-fast, openai/gpt-4o-mini] }
organizations:
  acme:
    plan: pro
    api_keys: [ { id: acme-1, key: "${ORG_KEY}" } ]
`;
  const PATHS = ['/health', '/health/ready', '/health/cache', '/health/analytics', '/health/vector', '/health/providers'];
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ yaml: YAML });
  });
  afterAll(() => t?.close());

  it('/health is 200 ok', async () => {
    const r = await get(`${t.url}/health`);
    expect([r.status, r.json]).toEqual([200, { status: 'ok' }]);
  });

  it('/health/ready is 200 ok with each store up and its kind', async () => {
    const r = await get(`${t.url}/health/ready`);
    expect(r.status).toBe(200);
    expect(r.json).toEqual({
      status: 'ok',
      draining: false,
      stores: {
        cache: { status: 'up', kind: 'memory' },
        analytics: { status: 'up', kind: 'pglite' },
        vector: { status: 'up', kind: 'pglite' },
      },
    });
  });

  it.each([
    ['cache', 'memory'],
    ['analytics', 'pglite'],
    ['vector', 'pglite'],
  ])('/health/%s is 200 with the terminus shape', async (store, kind) => {
    const r = await get(`${t.url}/health/${store}`);
    expect([r.status, r.json]).toEqual([200, { [store]: { status: 'up', kind } }]);
  });

  it('/health/providers lists every configured provider with its breaker closed', async () => {
    const r = await get(`${t.url}/health/providers`);
    expect(r.status).toBe(200);
    expect(r.json).toEqual({
      providers: [
        { id: 'mock', family: 'mock', state: 'closed' },
        { id: 'openai', family: 'openai', state: 'closed' },
      ],
    });
  });

  it('needs no API key: no header, a bogus key and a malformed header all get 200', async () => {
    for (const headers of [{}, { authorization: 'Bearer gw-not-a-key' }, { authorization: 'Basic xyz' }] as Record<string, string>[]) {
      for (const path of PATHS) expect([path, (await get(t.url + path, headers)).status]).toEqual([path, 200]);
    }
  });

  it('no body carries a secret from the config', async () => {
    for (const path of PATHS) {
      const r = await get(t.url + path);
      for (const secret of [PROVIDER_SECRET, HEADER_SECRET, ORG_KEY]) expect([path, r.text.includes(secret)]).toEqual([path, false]);
      expect(r.text).not.toContain('api.openai.com');
    }
  });

  it('readiness results are cached: a burst of probes reaches the stores once', async () => {
    const cache = t.app.get(CacheStore);
    const vector = t.app.get(VectorStore);
    const cachePing = jest.spyOn(cache, 'ping');
    const vectorStatus = jest.spyOn(vector, 'status');
    try {
      await sleep(PAST_READY_CACHE_MS);
      const started = Date.now();
      const burst = await Promise.all(Array.from({ length: 20 }, () => get(`${t.url}/health/ready`)));
      burst.push(await get(`${t.url}/health/ready`));
      expect(Date.now() - started).toBeLessThan(1_000);
      expect(burst.every((r) => r.status === 200 && r.json.status === 'ok')).toBe(true);
      expect([cachePing.mock.calls.length, vectorStatus.mock.calls.length]).toEqual([1, 1]);

      // Once the cached result is older than ~1.5 s, the next call probes again.
      await sleep(PAST_READY_CACHE_MS);
      expect((await get(`${t.url}/health/ready`)).status).toBe(200);
      expect([cachePing.mock.calls.length, vectorStatus.mock.calls.length]).toEqual([2, 2]);

      // The per-store endpoints are not cached: they are the way to look at a store now.
      await get(`${t.url}/health/cache`);
      expect(cachePing).toHaveBeenCalledTimes(3);
    } finally {
      cachePing.mockRestore();
      vectorStatus.mockRestore();
    }
  });
});

describe('health with Redis unreachable', () => {
  it('a closed port: the app starts; /health/cache 503 with a reason, /health/ready 200 degraded, each fast', async () => {
    const t = await startTestApp({ env: { REDIS_URL: `redis://127.0.0.1:${await closedPort()}` } });
    try {
      const cache = await get(`${t.url}/health/cache`);
      expect(cache.status).toBe(503);
      expect(cache.json).toEqual({ cache: { status: 'down', kind: 'redis', reason: expect.any(String) } });
      expect(cache.json.cache.reason.length).toBeGreaterThan(0);
      expect(cache.ms).toBeLessThan(ANSWER_BOUND_MS);

      const ready = await get(`${t.url}/health/ready`);
      expect(ready.status).toBe(200);
      expect(ready.json).toMatchObject({
        status: 'degraded',
        draining: false,
        stores: { cache: { status: 'down', kind: 'redis' }, analytics: { status: 'up' }, vector: { status: 'up' } },
      });
      expect(ready.ms).toBeLessThan(ANSWER_BOUND_MS);
      expect((await get(`${t.url}/health`)).status).toBe(200);
    } finally {
      await t.close();
    }
  });

  it('a Redis that accepts connections but never answers: each endpoint answers within ~2 s', async () => {
    const hole = await silentServer();
    const t = await startTestApp({ env: { REDIS_URL: `redis://127.0.0.1:${hole.port}` } });
    try {
      const [cache, ready] = await Promise.all([get(`${t.url}/health/cache`), get(`${t.url}/health/ready`)]);
      expect([cache.status, cache.json.cache.status, cache.json.cache.reason]).toEqual([503, 'down', expect.stringMatching(/\S/)]);
      expect([ready.status, ready.json.status, ready.json.stores.analytics.status]).toEqual([200, 'degraded', 'up']);
      expect(cache.ms).toBeLessThan(ANSWER_BOUND_MS);
      expect(ready.ms).toBeLessThan(ANSWER_BOUND_MS);
    } finally {
      await t.close();
      await hole.close();
    }
  });
});

describeWithRedis('health when a real Redis stops mid-run', () => {
  it('/health/cache goes from 200 redis to 503, readiness from ok to degraded', async () => {
    const redis = await throwaway(servers.startRedis);
    let t: TestApp | undefined;
    try {
      t = await startTestApp({ env: { REDIS_URL: redis.url } });
      const up = await get(`${t.url}/health/cache`);
      expect([up.status, up.json]).toEqual([200, { cache: { status: 'up', kind: 'redis' } }]);
      expect((await get(`${t.url}/health/ready`)).json.status).toBe('ok');

      redis.stop();
      const app = t;
      const down = await eventually(async () => {
        const r = await get(`${app.url}/health/cache`);
        expect(r.status).toBe(503);
        return r;
      }, 3_000);
      expect(down.json).toEqual({ cache: { status: 'down', kind: 'redis', reason: expect.stringMatching(/\S/) } });
      expect(down.ms).toBeLessThan(ANSWER_BOUND_MS);

      await sleep(PAST_READY_CACHE_MS);
      const ready = await get(`${t.url}/health/ready`);
      expect([ready.status, ready.json.status, ready.json.stores.cache.status]).toEqual([200, 'degraded', 'down']);
      expect(ready.ms).toBeLessThan(ANSWER_BOUND_MS);
    } finally {
      await t?.close();
      redis.stop();
    }
  });
});

describeWithPostgres('health on real Postgres and Redis', () => {
  describeWithRedis('(both servers)', () => {
    let db: TestDatabase;
    let t: TestApp;
    beforeAll(async () => {
      db = await createTestDatabase();
      t = await startTestApp({ env: { DATABASE_URL: db.url, GATEWAY_KEY_PEPPER: 'health-test-pepper', REDIS_URL: TEST_REDIS_URL! } });
    });
    afterAll(async () => {
      await t?.close();
      await db?.drop();
    });

    it('ready is 200 degraded: cache redis up, analytics postgres up, vector down for the missing extension', async () => {
      const r = await get(`${t.url}/health/ready`);
      expect(r.status).toBe(200);
      expect(r.json).toEqual({
        status: 'degraded',
        draining: false,
        stores: {
          cache: { status: 'up', kind: 'redis' },
          analytics: { status: 'up', kind: 'postgres' },
          vector: { status: 'down', kind: 'postgres', reason: expect.stringContaining('extension') },
        },
      });
      expect(r.text).not.toContain(db.url);
    });

    it('each store endpoint says the same', async () => {
      expect(await get(`${t.url}/health/cache`)).toMatchObject({ status: 200, json: { cache: { status: 'up', kind: 'redis' } } });
      expect(await get(`${t.url}/health/analytics`)).toMatchObject({ status: 200, json: { analytics: { status: 'up', kind: 'postgres' } } });
      const vector = await get(`${t.url}/health/vector`);
      expect(vector.status).toBe(503);
      expect(vector.json.vector).toEqual({ status: 'down', kind: 'postgres', reason: expect.stringContaining('extension') });
    });
  });
});

describeWithPostgres('health when Postgres stops mid-run', () => {
  it('analytics 503, ready 200 degraded, an unknown key 503 internal, a known key still served; nothing hangs or crashes', async () => {
    const pg = await throwaway(servers.startPostgres);
    let t: TestApp | undefined;
    try {
      t = await startTestApp({ env: { DATABASE_URL: pg.url, GATEWAY_KEY_PEPPER: 'outage-test-pepper' }, controllers: [ProbeController] });
      const ready = await get(`${t.url}/health/ready`);
      expect([ready.status, ready.json.status, ready.json.stores.analytics]).toEqual([200, 'degraded', { status: 'up', kind: 'postgres' }]);
      // Authenticated once before the outage: this key is now in the process-local key cache.
      expect((await get(`${t.url}/v1/probe/experiments`, { authorization: `Bearer ${PRO_KEY}` })).status).toBe(200);

      pg.stop();
      const app = t;
      const analytics = await eventually(async () => {
        const r = await get(`${app.url}/health/analytics`);
        expect(r.status).toBe(503);
        return r;
      }, 3_000);
      expect(analytics.json).toEqual({ analytics: { status: 'down', kind: 'postgres', reason: expect.stringMatching(/\S/) } });
      expect(analytics.ms).toBeLessThan(ANSWER_BOUND_MS);
      expect(analytics.text).not.toContain('outage-test-pepper');

      await sleep(PAST_READY_CACHE_MS);
      const down = await get(`${t.url}/health/ready`);
      // Still in the load balancer: chat serves the keys it knows through the outage.
      expect([down.status, down.json.status, down.json.stores.analytics.status]).toEqual([200, 'degraded', 'down']);
      expect(down.ms).toBeLessThan(ANSWER_BOUND_MS);

      // A valid key never seen before must be looked up in the dead store: 503 internal, promptly.
      const guarded = await get(`${t.url}/v1/probe/experiments`, { authorization: `Bearer ${READ_ONLY_KEY}` });
      expect([guarded.status, guarded.json]).toEqual([503, { error: { type: 'error', code: 'internal', message: 'The key store is unavailable.' } }]);
      expect(guarded.ms).toBeLessThan(5_000);
      // The key seen before the outage still authenticates (its last known record).
      expect((await get(`${t.url}/v1/probe/experiments`, { authorization: `Bearer ${PRO_KEY}` })).status).toBe(200);
      // Liveness is untouched.
      expect((await get(`${t.url}/health`)).status).toBe(200);
    } finally {
      await t?.close();
      pg.stop();
    }
  });
});
