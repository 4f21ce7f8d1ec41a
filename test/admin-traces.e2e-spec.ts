/**
 * Admin API, traces (docs/api.md "Admin API"): search the organisation's decision traces by time,
 * request, session, model, provider, status, error code, experiment and arm, newest first with cursor
 * pages; one trace in full with its candidates and scores, filtered targets and reasons, attempts and
 * failed attempts, timings, tokens and cost, and never any text of the request. Another
 * organisation's trace is a missing one, byte for byte. On PGlite and on real Postgres + Redis.
 */
import { randomUUID } from 'node:crypto';
import { DecisionTraceWriter } from '../src/traces/decision-trace.writer';
import { newTraceId } from '../src/traces/trace-id';
import { ADMIN_KEY, adminYaml, auth, describeEachStore, http, OTHER_ADMIN_KEY, OTHER_RW_KEY, RW_KEY } from './support/admin';
import { startTestApp, TestApp } from './support/app';

/** A phrase that must never come back from any admin route. */
const PROMPT = 'the secret launch codes are 0000';

const yaml = adminYaml('', {
  models: '  broken: { provider: mock, upstream: "broken+error-503", type: chat, cost: { input_per_mtok: 0.1, output_per_mtok: 0.4 } }',
  routes: [
    '  - { name: flaky, models: [flaky], strategy: ordered, targets: [mock/broken, mock/mock-fast] }',
    '  - { name: capped, models: [capped], strategy: ordered, targets: [mock/mock-fast, mock/mock-smart], constraints: { max_cost_increase: 0.5 } }',
  ].join('\n'),
});

describeEachStore('Admin API: traces', (env) => {
  let t: TestApp;
  const search = (query: Record<string, string | number>, key = ADMIN_KEY) => http(t).get('/v1/admin/traces').query(query).set(auth(key));
  const chat = (key: string, model: string, requestId: string, session: string) =>
    http(t)
      .post('/v1/chat/completions')
      .set(auth(key))
      .set('x-request-id', requestId)
      .set('gateway-session-id', session)
      .send({ model, messages: [{ role: 'user', content: PROMPT }] });

  beforeAll(async () => {
    t = await startTestApp({ yaml, env: env() });
    expect((await chat(RW_KEY, 'flaky', 'req-flaky', 'sess-1')).status).toBe(200);
    expect((await chat(RW_KEY, 'capped', 'req-capped', 'sess-1')).status).toBe(200);
    expect((await chat(RW_KEY, 'auto', 'req-auto', 'sess-2')).status).toBe(200);
    expect((await chat(RW_KEY, 'mock/broken', 'req-broken', 'sess-3')).status).toBe(502);
    expect((await chat(OTHER_RW_KEY, 'auto', 'req-other', 'sess-1')).status).toBe(200);
    await t.app.get(DecisionTraceWriter).flush();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('searches the organisation\'s traces newest first; no request text anywhere', async () => {
    const r = await search({});
    expect(r.status).toBe(200);
    expect(r.body.next_cursor).toBeNull();
    expect(r.body.data.map((x: any) => x.request_id)).toEqual(['req-broken', 'req-auto', 'req-capped', 'req-flaky']);
    const auto = r.body.data[1];
    expect(auto).toEqual({
      id: expect.stringMatching(/^\d+-\d+$/),
      created_at: expect.any(String),
      request_id: 'req-auto',
      api_key_id: 'acme-rw',
      session_id: 'sess-2',
      endpoint: 'chat',
      requested_model: 'auto',
      route: 'default',
      strategy: 'ordered',
      selected: { provider: 'mock', model: 'mock-fast' },
      status: 200,
      error_code: null,
      fallback_used: false,
      attempts: 1,
      latency_ms: expect.any(Number),
      ttft_ms: null,
      tokens: { prompt: expect.any(Number), completion: expect.any(Number), reasoning: null },
      cost_usd: expect.any(Number),
      finish_reason: 'stop',
      experiment: null,
    });
    expect(r.text).not.toContain(PROMPT);
    expect(r.text).not.toContain('launch codes');
    // The other organisation sees its own only.
    expect((await search({}, OTHER_ADMIN_KEY)).body.data.map((x: any) => x.request_id)).toEqual(['req-other']);
  });

  it('one trace: candidates and scores, filtered targets with reasons, attempts and failed attempts', async () => {
    const all = (await search({})).body.data;
    const id = (rid: string) => all.find((x: any) => x.request_id === rid).id;

    const flaky = await http(t).get(`/v1/admin/traces/${id('req-flaky')}`).set(auth(ADMIN_KEY));
    expect(flaky.status).toBe(200);
    expect(flaky.body).toMatchObject({
      request_id: 'req-flaky',
      route: 'flaky',
      selected: { provider: 'mock', model: 'mock-fast' },
      fallback_used: true,
      attempts: 2,
      candidates: [
        { provider: 'mock', model: 'broken', score: null },
        { provider: 'mock', model: 'mock-fast', score: null },
      ],
      filtered: [],
      failed_attempts: [{ provider: 'mock', model: 'broken', error: 'status', status: 503 }],
    });
    expect(flaky.text).not.toContain(PROMPT);

    const capped = await http(t).get(`/v1/admin/traces/${id('req-capped')}`).set(auth(ADMIN_KEY));
    expect(capped.body).toMatchObject({
      candidates: [{ provider: 'mock', model: 'mock-fast', score: null }],
      filtered: [{ provider: 'mock', model: 'mock-smart', reason: 'constraint_max_cost_increase' }],
      failed_attempts: [],
    });

    const broken = await http(t).get(`/v1/admin/traces/${id('req-broken')}`).set(auth(ADMIN_KEY));
    expect(broken.body).toMatchObject({ status: 502, error_code: 'upstream_error', selected: null, failed_attempts: [{ model: 'broken', status: 503 }] });
  });

  it('filters: request, session, model, provider, status and its class, error code, experiment, arm, time', async () => {
    const ids = async (q: Record<string, string>) => (await search(q)).body.data.map((x: any) => x.request_id);
    expect(await ids({ request_id: 'req-capped' })).toEqual(['req-capped']);
    expect(await ids({ request_id: 'req-other' })).toEqual([]);
    expect(await ids({ session_id: 'sess-1' })).toEqual(['req-capped', 'req-flaky']);
    expect(await ids({ model: 'mock-fast' })).toEqual(['req-auto', 'req-capped', 'req-flaky']);
    expect(await ids({ provider: 'mock', status: '200' })).toEqual(['req-auto', 'req-capped', 'req-flaky']);
    expect(await ids({ status: '5xx' })).toEqual(['req-broken']);
    expect(await ids({ error_code: 'upstream_error' })).toEqual(['req-broken']);
    expect(await ids({ experiment_id: randomUUID() })).toEqual([]);
    expect(await ids({ arm: 'candidate' })).toEqual([]);
    const future = new Date(Date.now() + 3_600_000).toISOString();
    expect(await ids({ from: future, to: new Date(Date.now() + 7_200_000).toISOString() })).toEqual([]);
  });

  it('an experiment\'s traces by id and arm', async () => {
    const experimentId = randomUUID();
    const writer = t.app.get(DecisionTraceWriter);
    for (const arm of ['baseline', 'candidate', 'candidate_fallback']) {
      writer.record({
        id: newTraceId(),
        requestId: `req-${arm}`,
        orgId: 'acme',
        apiKeyId: 'acme-rw',
        sessionId: null,
        endpoint: 'chat',
        requestedModel: 'auto',
        route: 'default',
        strategy: 'ordered',
        candidates: null,
        selectedProvider: 'mock',
        selectedModel: 'mock-fast',
        fallbackUsed: false,
        attempts: 1,
        failedAttempts: null,
        experimentId,
        experimentArm: arm,
        status: 200,
        errorCode: null,
        latencyMs: 5,
        ttftMs: null,
        promptTokens: 1,
        completionTokens: 1,
        reasoningTokens: null,
        costUsd: 0,
        finishReason: 'stop',
        createdAt: new Date(),
      });
    }
    await writer.flush();
    const r = await search({ experiment_id: experimentId });
    expect(r.body.data.map((x: any) => [x.request_id, x.experiment])).toEqual([
      ['req-candidate_fallback', { id: experimentId, arm: 'candidate_fallback' }],
      ['req-candidate', { id: experimentId, arm: 'candidate' }],
      ['req-baseline', { id: experimentId, arm: 'baseline' }],
    ]);
    expect((await search({ experiment_id: experimentId, arm: 'candidate' })).body.data.map((x: any) => x.request_id)).toEqual(['req-candidate']);
  });

  it('pages newest first with an opaque cursor tied to the filters', async () => {
    const all = (await search({})).body.data.map((x: any) => x.id);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const r: any = await search(cursor ? { limit: 2, cursor } : { limit: 2 });
      seen.push(...r.body.data.map((x: any) => x.id));
      cursor = r.body.next_cursor;
    } while (cursor);
    expect(seen).toEqual(all);
    const first = await search({ limit: 1 });
    const moved = await search({ limit: 1, model: 'mock-fast', cursor: first.body.next_cursor });
    expect([moved.status, moved.body.error.param]).toEqual([400, 'cursor']);
  });

  it('another organisation\'s trace, a missing and a malformed id: byte-identical 404s', async () => {
    const other = (await search({}, OTHER_ADMIN_KEY)).body.data[0].id as string;
    const [atUs, id] = other.split('-');
    const answers = new Set<string>();
    for (const path of [other, `${atUs}-${BigInt(id) + 1n}`, 'nope', '123', `${atUs}-99999999999999999999`, '9223372036854775808-1', '__proto__']) {
      const r = await http(t).get(`/v1/admin/traces/${path}`).set(auth(ADMIN_KEY));
      answers.add(`${r.status} ${r.text}`);
    }
    expect([...answers]).toEqual([`404 ${JSON.stringify({ error: { type: 'error', code: 'not_found', message: 'No trace with this id in the organisation.' } })}`]);
    expect((await http(t).get(`/v1/admin/traces/${other}`).set(auth(OTHER_ADMIN_KEY))).status).toBe(200);
  });

  it('bad parameters are 400 invalid_request naming them; 401 and 403 come first', async () => {
    const cases: Array<[Record<string, string>, string]> = [
      [{ status: '2xy' }, 'status'],
      [{ status: '600' }, 'status'],
      [{ experiment_id: 'not-a-uuid' }, 'experiment_id'],
      [{ arm: 'control' }, 'arm'],
      [{ request_id: 'has space' }, 'request_id'],
      [{ session_id: 'x'.repeat(129) }, 'session_id'],
      [{ error_code: 'a-b' }, 'error_code'],
      [{ from: '2020-01-01T00:00:00Z', to: '2021-06-01T00:00:00Z' }, 'from'],
      [{ prompt: 'x' }, 'prompt'],
    ];
    for (const [q, param] of cases) {
      const r = await search(q);
      expect([q, r.status, r.body.error?.code, r.body.error?.param]).toEqual([q, 400, 'invalid_request', param]);
    }
    expect((await http(t).get('/v1/admin/traces?status=bad')).status).toBe(401);
    const rw = await search({ status: 'bad' }, RW_KEY);
    expect([rw.status, rw.body.error.code]).toEqual([403, 'admin_permission']);
    const one = await http(t).get('/v1/admin/traces/1-1').set(auth(RW_KEY));
    expect([one.status, one.body.error.code]).toEqual([403, 'admin_permission']);
  });
});
