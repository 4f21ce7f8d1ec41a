import { Client } from 'pg';
import { MetricsService } from '../src/metrics/metrics.service';
import { startTestApp, TestApp } from './support/app';
import { FaultProxy } from './support/fault-proxy';
import { readReply, Reply } from './support/http-check';
import { createTestDatabase, TestDatabase } from './support/postgres';
import { TEST_DATABASE_URL, TEST_REDIS_URL } from './support/real-servers';

/**
 * The controls through a Redis outage (README "Limits"; docs/operations.md "Store outages"), on real
 * Postgres and Redis, two replicas, Redis taken away by a TCP proxy: the request windows hold per
 * replica (never unlimited), a spend budget is checked and spent in Postgres, shared by both
 * replicas, and once Redis is back its counter is rebuilt from Postgres.
 */
const describeWithBoth: jest.Describe = TEST_DATABASE_URL && TEST_REDIS_URL ? describe : describe.skip;

// Redis outlives a run: each run has its own organisation and keys.
const run = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
const ORG = `lim-outage-${run}`;
const KEYS = { rpm: `gw-lo-rpm-${run}`, budget: `gw-lo-budget-${run}` };
const yaml = `
providers:
  mock: { family: mock }
models:
  # One prompt token costs 1 USD: a one-word message costs exactly 1 USD.
  priced: { provider: mock, upstream: mock-p, cost: { input_per_mtok: 1000000, output_per_mtok: 0 } }
organizations:
  ${ORG}:
    plan: pro
    api_keys:
      - { id: rpm, key: "${KEYS.rpm}", limits: { requests_per_minute: 4 } }
      - { id: budget, key: "${KEYS.budget}", limits: { monthly_budget_usd: 5 } }
stores: { cache_command_timeout_ms: 1000, analytics_request_timeout_ms: 5000, probe_interval_ms: 100, probe_timeout_ms: 200 }
`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

async function metric(t: TestApp, name: string, labels: Record<string, string>): Promise<number> {
  const m = await t.app.get(MetricsService).registry.getSingleMetric(name)?.get();
  return m?.values.find((x) => Object.entries(labels).every(([k, want]) => x.labels[k] === want))?.value ?? 0;
}

describeWithBoth('limits through a Redis outage, two replicas', () => {
  let db: TestDatabase;
  let redis: FaultProxy;
  let a: TestApp;
  let b: TestApp;
  let direct: Client;
  const chat = async (t: TestApp, key: string): Promise<Reply> =>
    readReply(
      await fetch(`${t.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'priced', messages: [{ role: 'user', content: 'abcd' }] }),
      }),
    );
  const spent = async (): Promise<number> =>
    Number((await direct.query(`SELECT coalesce(sum(micro_usd), 0) AS s FROM monthly_spend WHERE org_id = $1 AND key_id = 'budget'`, [ORG])).rows[0].s);

  beforeAll(async () => {
    db = await createTestDatabase();
    redis = await FaultProxy.start(TEST_REDIS_URL!);
    const env = { DATABASE_URL: db.url, REDIS_URL: redis.urlFor(TEST_REDIS_URL!), GATEWAY_KEY_PEPPER: `pepper-${run}` };
    a = await startTestApp({ yaml, env });
    b = await startTestApp({ yaml, env });
    direct = new Client({ connectionString: db.url });
    await direct.connect();
  });
  afterAll(async () => {
    redis?.set('pass');
    await a?.close();
    await b?.close();
    await direct?.end();
    await redis?.close();
    await db?.drop();
  });

  it('Redis down: each replica holds the request window on its own, the budget is shared through Postgres; back up, the budget counter is rebuilt', async () => {
    // Two dollars spent while Redis is up, written to Postgres in the next batch.
    expect((await chat(a, KEYS.budget)).status).toBe(200);
    expect((await chat(b, KEYS.budget)).status).toBe(200);
    await until('the spend written', async () => (await spent()) === 2_000_000);

    redis.set('down');
    // The window of 4 per minute, per replica: never unlimited.
    for (const t of [a, b]) {
      for (let i = 0; i < 4; i++) expect((await chat(t, KEYS.rpm)).status).toBe(200);
      const r = await chat(t, KEYS.rpm);
      expect([r.status, r.json.error.code]).toEqual([429, 'rate_limited']);
      expect(await metric(t, 'gateway_limiter_fallbacks_total', { limit: 'requests_per_minute', to: 'local' })).toBeGreaterThan(0);
    }
    // The budget: three dollars left, for both replicas together, checked and spent in Postgres.
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await chat(i % 2 ? b : a, KEYS.budget)).status);
    expect(statuses).toEqual([200, 200, 200, 429, 429, 429]);
    expect(await spent()).toBe(5_000_000);
    const refused = await chat(b, KEYS.budget);
    expect(refused.json.error).toMatchObject({ code: 'budget_exceeded', limit: 5, used: 5 });

    redis.set('pass');
    for (const t of [a, b]) await until('the cache store back', async () => (await metric(t, 'gateway_store_available', { store: 'cache' })) === 1);
    // Redis's counter still says 2 (or nothing): it is rebuilt from Postgres's 5 before counting.
    for (const t of [a, b]) {
      const r = await chat(t, KEYS.budget);
      expect([r.status, r.json.error?.code]).toEqual([429, 'budget_exceeded']);
    }
    expect(await metric(a, 'gateway_limiter_fallbacks_total', { limit: 'budget', to: 'analytics' })).toBeGreaterThan(0);
  }, 60_000);
});
