/**
 * Admin API, models (docs/api.md "Admin API"): per (provider, model) of the catalogue, the learning
 * snapshot's figures for the organisation and the shared pool, its regressions, and for each route
 * listing it what explain says of a request to that route now (the same dry run: explain, asked with
 * the same request id, states the same confidence). On PGlite and on real Postgres + Redis.
 */
import { AggregationJob } from '../src/learning/aggregation.job';
import { DecisionTraceWriter } from '../src/traces/decision-trace.writer';
import { ADMIN_KEY, adminYaml, auth, describeEachStore, http, OTHER_ADMIN_KEY, OTHER_RW_KEY, RW_KEY } from './support/admin';
import { startTestApp, TestApp } from './support/app';

const STATS_FIELDS = ['computed_at', 'cost_mean_usd', 'latency_ms', 'n', 'nps', 'outcome_mean', 'outcome_variance', 'requests', 'score_mean', 'score_variance', 'success_rate', 'useful_rate'];

describeEachStore('Admin API: models', (env) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ yaml: adminYaml(), env: env() });
    // acme: three sessions on `auto` (mock-fast serves first) rated 9, 7 and 3; other: one rated 10.
    const sessions: Array<[string, string, number, boolean]> = [
      [RW_KEY, 'm-s1', 9, true],
      [RW_KEY, 'm-s2', 7, true],
      [RW_KEY, 'm-s3', 3, false],
      [OTHER_RW_KEY, 'm-o1', 10, true],
    ];
    for (const [key, session] of sessions) {
      const r = await http(t).post('/v1/chat/completions').set(auth(key)).set('gateway-session-id', session).send({ model: 'auto', messages: [{ role: 'user', content: 'hi' }] });
      expect(r.status).toBe(200);
    }
    await t.app.get(DecisionTraceWriter).flush();
    for (const [key, session, score, useful] of sessions) {
      expect((await http(t).post('/v1/feedback').set(auth(key)).send({ session_id: session, score, useful })).status).toBe(200);
    }
    expect(await t.app.get(AggregationJob).run()).toMatchObject({ aggregation: 'done' });
  });
  afterAll(async () => {
    await t?.close();
  });

  const list = (key: string, query: Record<string, string | number> = {}) => http(t).get('/v1/admin/models').query(query).set(auth(key));

  it('every catalogue pair, by provider then model, with the organisation\'s and the pool\'s figures', async () => {
    const r = await list(ADMIN_KEY);
    expect(r.status).toBe(200);
    expect(r.body.next_cursor).toBeNull();
    expect(r.body.stats_refreshed_at).toEqual(expect.any(String));
    expect(r.body.data.map((m: any) => `${m.provider}/${m.model}`)).toEqual(['alt/shared', 'mock/embed', 'mock/mock-fast', 'mock/mock-smart', 'mock/shared']);
    const fast = r.body.data.find((m: any) => m.model === 'mock-fast');
    expect(fast).toMatchObject({ type: 'chat', catalogue: { quality: 0.7, manual_score: null, cost: { input_per_mtok: 0.1, output_per_mtok: 0.4 } } });
    expect(Object.keys(fast.stats).sort()).toEqual(STATS_FIELDS);
    expect(fast.stats).toMatchObject({ n: 3, requests: 3, nps: { detractors: 1, passives: 1, promoters: 1 }, success_rate: 1 });
    expect(fast.stats.score_mean).toBeCloseTo(19 / 30, 9);
    expect(fast.stats.useful_rate).toBeCloseTo(2 / 3, 9);
    expect(fast.stats.latency_ms.p50).toEqual(expect.any(Number));
    // The pool spans organisations: the other organisation's session is in it.
    expect(fast.pool).toMatchObject({ n: 4, requests: 4, nps: { detractors: 1, passives: 1, promoters: 2 } });
    // No traffic, no figures.
    expect(r.body.data.find((m: any) => m.model === 'mock-smart')).toMatchObject({ stats: null, pool: null, regressions: { count: 0, last_at: null } });
    expect(r.body.data.find((m: any) => m.model === 'embed').routes).toEqual([]);

    // The other organisation sees its own figures beside the same pool.
    const other = (await list(OTHER_ADMIN_KEY)).body.data.find((m: any) => m.model === 'mock-fast');
    expect(other.stats).toMatchObject({ n: 1, nps: { detractors: 0, passives: 0, promoters: 1 } });
    expect(other.pool).toEqual(fast.pool);
  });

  it('per route listing the pair: explain\'s decision for a request to it (score, rank, pick, confidence)', async () => {
    const fast = (await list(ADMIN_KEY, { model: 'mock-fast' })).body.data[0];
    expect(fast.routes.map((x: any) => x.route)).toEqual(['default', 'learned']);
    expect(fast.routes[0]).toEqual({
      route: 'default',
      strategy: 'ordered',
      phase: null,
      confidence: null,
      confidence_reason: 'no_router_invoked',
      used_shared_pool_prior: false,
      score: 1,
      rank: 1,
      would_select: true,
      filtered_reason: null,
    });
    const learned = fast.routes[1];
    expect(learned).toMatchObject({ strategy: 'feedback_driven', rank: expect.any(Number), would_select: expect.any(Boolean) });
    // A learning router ran: a confidence is stated (capped while the organisation has few samples).
    expect(learned.confidence).toEqual(expect.any(Number));

    // Explain, asked about the same route with the same request id, states the same decision and confidence.
    const explain = await http(t)
      .post('/v1/routing/explain')
      .set(auth(ADMIN_KEY))
      .set('x-request-id', 'admin-models:learned')
      .send({ request: { model: 'smart', messages: [{ role: 'user', content: '' }] } });
    expect(explain.status).toBe(200);
    expect(learned.confidence).toBe(explain.body.confidence);
    expect(learned.confidence_reason).toBe(explain.body.confidence_reason);
    expect(learned.phase).toBe(explain.body.phase);
    const rank = explain.body.candidates.findIndex((c: any) => c.provider === 'mock' && c.model === 'mock-fast');
    expect(learned.rank).toBe(rank + 1);
    expect(learned.score).toBe(explain.body.candidates[rank].score);
    expect(learned.would_select).toBe(explain.body.would_select.model === 'mock-fast');
  });

  it('regressions of the organisation\'s pair in the penalty window (an experiment rollback records one)', async () => {
    const created = await http(t)
      .post('/v1/experiments')
      .set(auth(RW_KEY))
      .set('x-gateway-confirm', 'experiments')
      .send({ type: 'canary', baseline: { provider: 'mock', model: 'mock-fast' }, candidate: { provider: 'mock', model: 'mock-smart' }, traffic_pct: 5 });
    expect(created.status).toBe(201);
    expect((await http(t).post(`/v1/experiments/${created.body.id}/rollback`).set(auth(RW_KEY)).set('x-gateway-confirm', 'experiments')).status).toBe(200);
    const smart = (await list(ADMIN_KEY, { provider: 'mock', model: 'mock-smart' })).body.data[0];
    expect(smart.regressions).toEqual({ count: 1, last_at: expect.any(String) });
    const other = (await list(OTHER_ADMIN_KEY, { provider: 'mock', model: 'mock-smart' })).body.data[0];
    expect(other.regressions).toEqual({ count: 0, last_at: null });
  });

  it('filters and cursor pages', async () => {
    expect((await list(ADMIN_KEY, { provider: 'alt' })).body.data.map((m: any) => m.model)).toEqual(['shared']);
    expect((await list(ADMIN_KEY, { type: 'embedding' })).body.data.map((m: any) => m.model)).toEqual(['embed']);
    expect((await list(ADMIN_KEY, { model: 'nope' })).body).toMatchObject({ data: [], next_cursor: null });
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const r: any = await list(ADMIN_KEY, cursor ? { limit: 2, cursor } : { limit: 2 });
      expect(r.body.data.length).toBeLessThanOrEqual(2);
      seen.push(...r.body.data.map((m: any) => `${m.provider}/${m.model}`));
      cursor = r.body.next_cursor;
    } while (cursor);
    expect(seen).toEqual(['alt/shared', 'mock/embed', 'mock/mock-fast', 'mock/mock-smart', 'mock/shared']);
    const first = await list(ADMIN_KEY, { limit: 1 });
    const wrong = await list(ADMIN_KEY, { limit: 1, type: 'chat', cursor: first.body.next_cursor });
    expect([wrong.status, wrong.body.error.param]).toEqual([400, 'cursor']);
  });

  it('bad input is 400 invalid_request naming the parameter; 401 and 403 before it', async () => {
    for (const [q, param] of [
      [{ type: 'vision' }, 'type'],
      [{ provider: 'a b' }, 'provider'],
      [{ limit: '-1' }, 'limit'],
      [{ org: 'other' }, 'org'],
    ] as const) {
      const r = await list(ADMIN_KEY, q);
      expect([r.status, r.body.error.code, r.body.error.param]).toEqual([400, 'invalid_request', param]);
    }
    expect((await http(t).get('/v1/admin/models?limit=-1')).status).toBe(401);
    const rw = await list(RW_KEY, { limit: -1 });
    expect([rw.status, rw.body.error.code]).toEqual([403, 'admin_permission']);
  });
});
