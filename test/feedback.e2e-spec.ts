import { FeedbackModule } from '../src/feedback/feedback.module';
import { AggregationJob } from '../src/learning/aggregation.job';
import { LearningModule } from '../src/learning/learning.module';
import { MetricsService } from '../src/metrics/metrics.service';
import { StatsSnapshot } from '../src/learning/model-stats';
import { SqlStore } from '../src/stores/sql/sql-store';
import { DecisionTraceWriter } from '../src/traces/decision-trace.writer';
import { PRO_KEY, startTestApp, TestApp } from './support/app';
import { FaultProxy } from './support/fault-proxy';
import { createTestDatabase, type TestDatabase } from './support/postgres';
import { describeWithPostgres } from './support/real-servers';

/** `POST /v1/feedback` (docs/api.md "POST /v1/feedback") and the learning loop it feeds, through HTTP. */
const BURST_KEY = 'gw-feedback-burst';
const BETA_KEY = 'gw-feedback-beta';
const YAML = `
providers:
  mock: { family: mock }
models:
  fast: { provider: mock, upstream: "mock-fast", type: chat, cost: { input_per_mtok: 1, output_per_mtok: 2 } }
limits: { requests_per_minute_per_key: 30 }
learning: { refresh_seconds: 3600 }
organizations:
  acme:
    plan: pro
    api_keys: [ { id: acme-rw, key: "${PRO_KEY}" }, { id: acme-burst, key: "${BURST_KEY}" } ]
  beta:
    plan: free
    api_keys: [ { id: beta-rw, key: "${BETA_KEY}" } ]
`;
const MODULES = [FeedbackModule, LearningModule];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Reply {
  status: number;
  body: any;
  headers: Headers;
}

async function metricValue(t: TestApp, name: string): Promise<number | undefined> {
  return (await t.app.get(MetricsService).registry.getSingleMetric(name)?.get())?.values[0]?.value;
}

async function post(t: TestApp, path: string, body: unknown, opts: { key?: string | null; raw?: string; headers?: Record<string, string> } = {}): Promise<Reply> {
  const key = opts.key === undefined ? PRO_KEY : opts.key;
  const res = await fetch(`${t.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}), ...(opts.headers ?? {}) },
    body: opts.raw ?? JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
}

const feedback = (t: TestApp, body: unknown, key?: string | null) => post(t, '/v1/feedback', body, { key });

interface FeedbackRow {
  score: number;
  useful: boolean;
  created_at: Date;
  updated_at: Date;
}

async function rowsOf(t: TestApp, org: string, session: string): Promise<FeedbackRow[]> {
  const { rows } = await t.app
    .get(SqlStore)
    .query<FeedbackRow>('SELECT score, useful, created_at, updated_at FROM feedback WHERE org_id = $1 AND session_id = $2', [org, session]);
  return rows;
}

const VALID = { session_id: 'sess-1', score: 7, useful: true };
const without = (k: keyof typeof VALID) => Object.fromEntries(Object.entries(VALID).filter(([key]) => key !== k));

describe('POST /v1/feedback', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ yaml: YAML, modules: MODULES });
  });
  afterAll(() => t?.close());

  it('stores a valid answer for the caller’s organisation and answers 200 {}', async () => {
    const r = await feedback(t, { session_id: 'stored-1', score: 9, useful: true });
    expect([r.status, r.body]).toEqual([200, {}]);
    expect(await rowsOf(t, 'acme', 'stored-1')).toMatchObject([{ score: 9, useful: true }]);
    expect(await rowsOf(t, 'beta', 'stored-1')).toEqual([]);
  });

  it('accepts the edges of every field', async () => {
    const longest = 'Az09._:-'.repeat(16);
    expect(longest).toHaveLength(128);
    for (const body of [
      { session_id: longest, score: 0, useful: false },
      { session_id: 'x', score: 10, useful: true },
      { session_id: 'a:b.c_d-e', score: 6, useful: false },
    ]) {
      const r = await feedback(t, body);
      expect([body.session_id, r.status, r.body]).toEqual([body.session_id, 200, {}]);
    }
    expect(await rowsOf(t, 'acme', longest)).toMatchObject([{ score: 0, useful: false }]);
  });

  it.each<[string, unknown, string]>([
    ['session_id missing', without('session_id'), 'session_id'],
    ['session_id empty', { ...VALID, session_id: '' }, 'session_id'],
    ['session_id of 129 characters', { ...VALID, session_id: 'a'.repeat(129) }, 'session_id'],
    ['session_id with a space', { ...VALID, session_id: 'a b' }, 'session_id'],
    ['session_id with a slash', { ...VALID, session_id: 'a/b' }, 'session_id'],
    ['session_id with a non-ASCII letter', { ...VALID, session_id: 'sessão' }, 'session_id'],
    ['session_id a number', { ...VALID, session_id: 42 }, 'session_id'],
    ['session_id null', { ...VALID, session_id: null }, 'session_id'],
    ['score missing', without('score'), 'score'],
    ['score 11', { ...VALID, score: 11 }, 'score'],
    ['score -1', { ...VALID, score: -1 }, 'score'],
    ['score 7.5', { ...VALID, score: 7.5 }, 'score'],
    ['score a string', { ...VALID, score: '7' }, 'score'],
    ['score null', { ...VALID, score: null }, 'score'],
    ['score a boolean', { ...VALID, score: true }, 'score'],
    ['useful missing', without('useful'), 'useful'],
    ['useful a string', { ...VALID, useful: 'true' }, 'useful'],
    ['useful a number', { ...VALID, useful: 1 }, 'useful'],
    ['useful null', { ...VALID, useful: null }, 'useful'],
    ['an unknown key', { ...VALID, comment: 'great' }, 'comment'],
    ['an unknown key set to null', { ...VALID, user: null }, 'user'],
  ])('refuses %s: 400 invalid_request naming the field, nothing stored', async (_case, body, param) => {
    const r = await feedback(t, body);
    expect(r.status).toBe(400);
    expect(r.body).toEqual({ error: { type: 'error', code: 'invalid_request', message: expect.any(String), param } });
    const { rows } = await t.app.get(SqlStore).query<{ n: number }>(`SELECT count(*)::int AS n FROM feedback WHERE session_id = 'sess-1'`, []);
    expect(rows[0].n).toBe(0);
  });

  it('refuses a body that is not a JSON object, or too large, with 400', async () => {
    for (const raw of ['{"session_id":', '[]', '"sess-1"', 'null']) {
      const r = await post(t, '/v1/feedback', undefined, { raw });
      expect([raw, r.status, r.body.error.code]).toEqual([raw, 400, 'invalid_request']);
    }
    const big = await post(t, '/v1/feedback', { ...VALID, pad: 'x'.repeat(8 * 1024) });
    expect([big.status, big.body.error.code]).toEqual([400, 'body_too_large']);
  });

  it('needs a valid API key before anything else (401 even for a bad body)', async () => {
    expect((await feedback(t, VALID, null)).status).toBe(401);
    expect((await feedback(t, { nonsense: true }, 'gw-not-a-key')).body.error.code).toBe('invalid_api_key');
  });

  it('replaces an earlier answer for the session and records when (one row, created_at kept, updated_at moved)', async () => {
    expect((await feedback(t, { session_id: 'again-1', score: 3, useful: false })).status).toBe(200);
    const [first] = await rowsOf(t, 'acme', 'again-1');
    await sleep(20);
    expect((await feedback(t, { session_id: 'again-1', score: 10, useful: true })).body).toEqual({});
    const rows = await rowsOf(t, 'acme', 'again-1');
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ score: 10, useful: true });
    expect(rows[0].created_at.getTime()).toBe(first.created_at.getTime());
    expect(rows[0].updated_at.getTime()).toBeGreaterThan(first.updated_at.getTime());
    // The same session id in another organisation is another session.
    expect((await feedback(t, { session_id: 'again-1', score: 1, useful: false }, BETA_KEY)).status).toBe(200);
    expect(await rowsOf(t, 'acme', 'again-1')).toMatchObject([{ score: 10 }]);
    expect(await rowsOf(t, 'beta', 'again-1')).toMatchObject([{ score: 1 }]);
  });

  it('accepts feedback before the session’s traces exist; the next aggregation attributes it once they do', async () => {
    const session = 'early-bird';
    // y = 0.6 · 8/10 + 0.4 · 1 = 0.88
    expect((await feedback(t, { session_id: session, score: 8, useful: true })).status).toBe(200);
    const job = t.app.get(AggregationJob);
    const snapshot = t.app.get(StatsSnapshot);
    await job.run();
    expect(snapshot.get('acme', 'mock', 'fast')).toBeUndefined();

    for (let i = 0; i < 2; i++) {
      const chat = await post(t, '/v1/chat/completions', { model: 'fast', messages: [{ role: 'user', content: 'hello' }] }, { headers: { 'gateway-session-id': session } });
      expect(chat.status).toBe(200);
    }
    await t.app.get(DecisionTraceWriter).flush();
    expect(await job.run()).toEqual({ aggregation: 'done', snapshot: 'refreshed' });
    const s = snapshot.get('acme', 'mock', 'fast');
    // Two requests, one session: one sample.
    expect(s).toMatchObject({ n: 1, requests: 2, successRate: 1, npsPassives: 1, npsPromoters: 0, npsDetractors: 0 });
    expect(s!.outcomeMean).toBeCloseTo(0.88, 9);
    expect(s!.scoreMean).toBeCloseTo(0.8, 9);
    expect(s!.costMeanUsd).toBeGreaterThan(0);
    expect(snapshot.pool('mock', 'fast')).toMatchObject({ n: 1, requests: 2 });
    expect(snapshot.orgSamples('acme')).toBe(1);
    expect(snapshot.orgSamples('beta')).toBe(0);

    // A changed answer replaces the sample on the next run instead of adding one: 9 → promoter, y = 0.94.
    await feedback(t, { session_id: session, score: 9, useful: true });
    await job.run();
    expect(snapshot.get('acme', 'mock', 'fast')).toMatchObject({ n: 1, npsPromoters: 1 });
    expect(snapshot.get('acme', 'mock', 'fast')!.outcomeMean).toBeCloseTo(0.94, 9);
  });

  it('spends the per-key rate limit: 429 rate_limited with Retry-After, other keys unaffected', async () => {
    let denied: Reply | undefined;
    let allowed = 0;
    for (let i = 0; i < 31 && !denied; i++) {
      const r = await feedback(t, { session_id: `burst-${i}`, score: 5, useful: true }, BURST_KEY);
      if (r.status === 200) allowed++;
      else denied = r;
    }
    expect(allowed).toBe(30);
    expect([denied?.status, denied?.body.error.code]).toEqual([429, 'rate_limited']);
    expect(Number(denied!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await rowsOf(t, 'acme', 'burst-30')).toEqual([]);
    expect((await feedback(t, { session_id: 'other-key', score: 5, useful: true })).status).toBe(200);
  });
});

describe('POST /v1/feedback with the analytics store down', () => {
  it('answers 200 at once, holding the answer, and the learning loop keeps its snapshot', async () => {
    const t = await startTestApp({ yaml: YAML, modules: MODULES });
    try {
      // Authenticates the key while the store is up: the key caches carry it through the outage, as in production.
      expect((await feedback(t, { session_id: 'before-outage', score: 5, useful: true })).status).toBe(200);
      await t.app.get(SqlStore).close();
      const started = Date.now();
      const r = await feedback(t, VALID);
      expect(Date.now() - started).toBeLessThan(2_000);
      expect([r.status, r.body]).toEqual([200, {}]);
      expect(await metricValue(t, 'gateway_feedback_held')).toBe(1);
      expect(await t.app.get(AggregationJob).run()).toEqual({ aggregation: 'failed', snapshot: 'kept' });
      expect(t.logs.some((l) => l.includes('"topic":"analytics-store:feedback"'))).toBe(true);
    } finally {
      await t.close();
    }
  });
});

describeWithPostgres('POST /v1/feedback on a real Postgres', () => {
  let db: TestDatabase;
  let relay: FaultProxy;
  let t: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase();
    relay = await FaultProxy.start(db.url);
    t = await startTestApp({ yaml: YAML, modules: MODULES, env: { DATABASE_URL: relay.urlFor(db.url), GATEWAY_KEY_PEPPER: 'feedback-test-pepper' } });
  });
  afterAll(async () => {
    await t?.close();
    await relay?.close();
    await db?.drop();
  });

  it('upserts, and the aggregation runs the same on Postgres', async () => {
    expect((await feedback(t, { session_id: 'pg-1', score: 4, useful: false })).status).toBe(200);
    await sleep(10);
    expect((await feedback(t, { session_id: 'pg-1', score: 6, useful: true })).status).toBe(200);
    const rows = await rowsOf(t, 'acme', 'pg-1');
    expect(rows).toMatchObject([{ score: 6, useful: true }]);
    expect(rows[0].updated_at.getTime()).toBeGreaterThan(rows[0].created_at.getTime());

    const chat = await post(t, '/v1/chat/completions', { model: 'fast', messages: [{ role: 'user', content: 'hi' }] }, { headers: { 'gateway-session-id': 'pg-1' } });
    expect(chat.status).toBe(200);
    await t.app.get(DecisionTraceWriter).flush();
    expect(await t.app.get(AggregationJob).run()).toEqual({ aggregation: 'done', snapshot: 'refreshed' });
    // y = 0.6 · 0.6 + 0.4 · 1 = 0.76; score 6 is a detractor.
    const s = t.app.get(StatsSnapshot).get('acme', 'mock', 'fast');
    expect(s).toMatchObject({ n: 1, requests: 1, npsDetractors: 1 });
    expect(s!.outcomeMean).toBeCloseTo(0.76, 9);
  });

  it('holds answers while Postgres stops answering (200 at once, never hanging) and stores them once it is back', async () => {
    // Live connections are cut, new ones are accepted and never answered.
    relay.set('down');
    relay.set('frozen');
    for (const session of ['pg-down-1', 'pg-down-2']) {
      const started = Date.now();
      const r = await feedback(t, { session_id: session, score: 5, useful: true });
      const ms = Date.now() - started;
      expect([session, r.status, r.body]).toEqual([session, 200, {}]);
      // The first call finds its pooled connection cut; the second joins the held answer without asking the store.
      expect(ms).toBeLessThan(2_000);
    }
    expect(await metricValue(t, 'gateway_feedback_held')).toBe(2);
    expect(t.logs.some((l) => l.includes('"topic":"analytics-store:feedback"'))).toBe(true);
    // Routing keeps the last snapshot.
    expect(await t.app.get(AggregationJob).run()).toMatchObject({ aggregation: 'failed', snapshot: 'kept' });
    expect(t.app.get(StatsSnapshot).get('acme', 'mock', 'fast')).toMatchObject({ n: 1 });

    relay.set('pass');
    const deadline = Date.now() + 15_000;
    while ((await metricValue(t, 'gateway_feedback_held')) !== 0 && Date.now() < deadline) await sleep(100);
    for (const session of ['pg-down-1', 'pg-down-2']) expect(await rowsOf(t, 'acme', session)).toMatchObject([{ score: 5, useful: true }]);
  }, 40_000);
});
