import { Client } from 'pg';
import { MetricsService } from '../src/metrics/metrics.service';
import { TenancyOptions, TenancyService } from '../src/tenancy/tenancy.service';
import { startTestApp, TestApp } from './support/app';
import { FaultProxy } from './support/fault-proxy';
import { createTestDatabase, TestDatabase } from './support/postgres';
import { TEST_DATABASE_URL, TEST_REDIS_URL } from './support/real-servers';

/**
 * Store outages on real Postgres and Redis, taken away by a TCP proxy the gateway connects through
 * (docs/operations.md "Store outages"): a known key keeps authenticating through a Postgres outage
 * far longer than every key-cache lifetime, on two replicas; an unknown key is 503 at once; a
 * revocation made before or during the outage still wins; and once a store froze, no request waits
 * on it again (the store breaker refuses calls until its background probe sees the store answer).
 */
const describeWithBoth: jest.Describe = TEST_DATABASE_URL && TEST_REDIS_URL ? describe : describe.skip;

// Redis outlives a run: each run has its own provider, organisation, keys and pepper.
const run = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
const ORG = `org-${run}`;
const KEYS = { k1: `gw-outage-1-${run}`, k2: `gw-outage-2-${run}`, k3: `gw-outage-3-${run}` };
const COMMAND_TIMEOUT_MS = 1_000;
const yaml = `
providers:
  mock-${run}: { family: mock }
models:
  m: { provider: mock-${run}, upstream: mock-fast }
routes:
  - { name: main, models: [auto], targets: [mock-${run}/m] }
organizations:
  ${ORG}:
    plan: pro
    features: [has_test_ab, feedback_routing, explain]
    api_keys:
      - { id: k1, key: "${KEYS.k1}" }
      - { id: k2, key: "${KEYS.k2}" }
      - { id: k3, key: "${KEYS.k3}" }
stores: { cache_command_timeout_ms: ${COMMAND_TIMEOUT_MS}, analytics_request_timeout_ms: ${COMMAND_TIMEOUT_MS}, probe_interval_ms: 100, probe_timeout_ms: 200 }
`;
/** Every key cache of the gateway lives at most 300 ms here, so a 2.5 s outage outlasts each of them many times over. */
const SHORT_TTLS: TenancyOptions = { localTtlMs: 150, negativeTtlMs: 150, sharedTtlMs: 300 };
const LONGEST_TTL_MS = 300;
/**
 * A request that waited on a store takes at least COMMAND_TIMEOUT_MS; one that did not, less, even
 * when the machine stalls it (a full parallel test run on two loaded cores once took a request that
 * waited on nothing past half the timeout). A wait is the whole timeout, so the line is just below it.
 */
const NO_WAIT_MS = COMMAND_TIMEOUT_MS * 0.9;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function chat(t: TestApp, key: string): Promise<{ status: number; body: any; ms: number }> {
  const started = performance.now();
  const r = await fetch(`${t.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'auto', messages: [{ role: 'user', content: 'hello' }] }),
  });
  const body = await r.json();
  return { status: r.status, body, ms: performance.now() - started };
}

async function metric(t: TestApp, name: string, labels: Record<string, string>): Promise<number> {
  const m = await t.app.get(MetricsService).registry.getSingleMetric(name)?.get();
  const v = m?.values.find((x) => Object.entries(labels).every(([k, want]) => x.labels[k] === want));
  return v?.value ?? 0;
}

async function until(what: string, check: () => Promise<boolean>, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

/** Sequential requests for `ms`, each one's status and duration. */
async function steady(t: TestApp, key: string, ms: number): Promise<Array<{ status: number; ms: number }>> {
  const out: Array<{ status: number; ms: number }> = [];
  const end = Date.now() + ms;
  while (Date.now() < end && out.length < 2_000) {
    const r = await chat(t, key);
    out.push({ status: r.status, ms: r.ms });
    await sleep(20);
  }
  return out;
}

describeWithBoth('store outages on real Postgres and Redis, two replicas', () => {
  let db: TestDatabase;
  let pg: FaultProxy;
  let redis: FaultProxy;
  let a: TestApp;
  let b: TestApp;
  let direct: Client;

  beforeAll(async () => {
    db = await createTestDatabase();
    pg = await FaultProxy.start(db.url);
    redis = await FaultProxy.start(TEST_REDIS_URL!);
    const env = { DATABASE_URL: pg.urlFor(db.url), REDIS_URL: redis.urlFor(TEST_REDIS_URL!), GATEWAY_KEY_PEPPER: `pepper-${run}` };
    const overrides = [{ provide: TenancyOptions, useValue: SHORT_TTLS }];
    a = await startTestApp({ yaml, env, overrides });
    b = await startTestApp({ yaml, env, overrides });
    direct = new Client({ connectionString: db.url });
    await direct.connect();
  });
  afterAll(async () => {
    pg?.set('pass');
    redis?.set('pass');
    await a?.close();
    await b?.close();
    await direct?.end();
    await pg?.close();
    await redis?.close();
    await db?.drop();
  });

  afterEach(() => {
    pg.set('pass');
    redis.set('pass');
  });

  it('Postgres down far longer than every key cache: a known key answers throughout on both replicas, unknown keys 503 at once, revocations win', async () => {
    const tenancy = a.app.get(TenancyService);
    const revokedBefore = await tenancy.createKey(ORG, ['read', 'write']);
    const neverUsed = await tenancy.createKey(ORG, ['read', 'write']);
    for (const t of [a, b]) {
      expect((await chat(t, KEYS.k1)).status).toBe(200);
      expect((await chat(t, revokedBefore.key)).status).toBe(200);
    }
    // Revoked on A; B's last look at the key said it was valid, and B asks no store before the outage.
    expect(await tenancy.revokeKey(revokedBefore.id)).toBe(true);
    pg.set('down');

    const started = Date.now();
    const results = await Promise.all([steady(a, KEYS.k1, 10 * LONGEST_TTL_MS), steady(b, KEYS.k1, 10 * LONGEST_TTL_MS)]);
    expect(Date.now() - started).toBeGreaterThan(8 * LONGEST_TTL_MS);
    for (const r of results) {
      expect(r.length).toBeGreaterThan(10);
      expect(r.filter((x) => x.status !== 200)).toEqual([]);
    }
    for (const t of [a, b]) {
      // The tombstone the revocation left wins over the record B last saw.
      expect((await chat(t, revokedBefore.key)).body.error.code).toBe('invalid_api_key');
      for (const key of [neverUsed.key, 'gw-no-such-key']) {
        const r = await chat(t, key);
        expect([r.status, r.body.error]).toEqual([503, { type: 'error', code: 'internal', message: 'The key store is unavailable.' }]);
        expect(r.ms).toBeLessThan(NO_WAIT_MS);
      }
      expect(await metric(t, 'gateway_auth_last_known_total', {})).toBeGreaterThan(0);
    }

    // Revoked during the outage (on the server itself, which the gateway cannot reach): once it is
    // back, both replicas refuse the key within the caches' lifetimes.
    await direct.query(`UPDATE api_keys SET revoked_at = now() WHERE id = 'k1'`);
    pg.set('pass');
    for (const t of [a, b]) await until('k1 refused after the outage', async () => (await chat(t, KEYS.k1)).status === 401);
    expect((await chat(a, KEYS.k2)).status).toBe(200);
  });

  it('Redis frozen: only requests in flight when it froze wait for it; every later one answers without waiting', async () => {
    for (const t of [a, b]) expect((await chat(t, KEYS.k2)).status).toBe(200);
    redis.set('frozen');
    const results = await Promise.all([steady(a, KEYS.k2, 3_000), steady(b, KEYS.k2, 3_000)]);
    for (const r of results) {
      expect(r.filter((x) => x.status !== 200)).toEqual([]);
      const slow = r.filter((x) => x.ms >= NO_WAIT_MS);
      expect(slow.length).toBeLessThanOrEqual(1);
      // Without the store breaker, each cache call waits its command timeout once per retry interval.
      expect(r.length).toBeGreaterThan(20);
    }
    for (const t of [a, b]) expect(await metric(t, 'gateway_store_available', { store: 'cache' })).toBe(0);
    redis.set('pass');
    for (const t of [a, b]) await until('the cache store back', async () => (await metric(t, 'gateway_store_available', { store: 'cache' })) === 1);
    expect((await chat(a, KEYS.k2)).status).toBe(200);
  });

  it('Postgres frozen (connections accepted, nothing answered): known keys answer, unknown keys and experiment reads 503, none waits after the first', async () => {
    for (const t of [a, b]) expect((await chat(t, KEYS.k3)).status).toBe(200);
    pg.set('frozen');
    const results = await Promise.all([steady(a, KEYS.k3, 3_000), steady(b, KEYS.k3, 3_000)]);
    for (const r of results) {
      expect(r.filter((x) => x.status !== 200)).toEqual([]);
      expect(r.filter((x) => x.ms >= NO_WAIT_MS).length).toBeLessThanOrEqual(1);
    }
    for (const t of [a, b]) {
      const unknown = await chat(t, 'gw-no-such-key-2');
      expect([unknown.status, unknown.body.error.code]).toEqual([503, 'internal']);
      expect(unknown.ms).toBeLessThan(NO_WAIT_MS);
      const started = performance.now();
      const list = await fetch(`${t.url}/v1/experiments`, { headers: { authorization: `Bearer ${KEYS.k3}` } });
      expect(list.status).toBe(503);
      expect(performance.now() - started).toBeLessThan(NO_WAIT_MS);
      expect(await metric(t, 'gateway_store_available', { store: 'analytics' })).toBe(0);
    }
    pg.set('pass');
    for (const t of [a, b]) await until('the analytics store back', async () => (await metric(t, 'gateway_store_available', { store: 'analytics' })) === 1);
    const list = await fetch(`${a.url}/v1/experiments`, { headers: { authorization: `Bearer ${KEYS.k3}` } });
    expect(list.status).toBe(200);
  });
});
