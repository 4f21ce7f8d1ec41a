/**
 * Admin API, experiments (docs/api.md "Admin API"): the list with its status filter and pages, one
 * experiment with its lifecycle events (actors) and live per-arm figures and stop-rule state, which
 * are the stop rules' own; another organisation's experiment is a missing one, byte for byte. On
 * PGlite and on real Postgres + Redis.
 */
import { randomUUID } from 'node:crypto';
import { SqlStore } from '../src/stores/sql/sql-store';
import { DecisionTraceWriter, type DecisionTrace } from '../src/traces/decision-trace.writer';
import { newTraceId } from '../src/traces/trace-id';
import { ADMIN_KEY, adminYaml, auth, describeEachStore, http, OTHER_ADMIN_KEY, RW_KEY } from './support/admin';
import { startTestApp, TestApp } from './support/app';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const pair = (p: string, m: string) => ({ provider: p, model: m });

type Seed = { arm: string; session: string | null; status?: number; latency?: number; cost?: number | null; model: string };

describeEachStore('Admin API: experiments', (env) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ yaml: adminYaml(), env: env() });
  });
  afterAll(async () => {
    await t?.close();
  });

  const create = async (body: Record<string, unknown>) => {
    const r = await http(t).post('/v1/experiments').set(auth(RW_KEY)).set('x-gateway-confirm', 'experiments').send(body);
    expect(r.status).toBe(201);
    return r.body.id as string;
  };
  const seedTraces = async (experimentId: string, seeds: Seed[]) => {
    const writer = t.app.get(DecisionTraceWriter);
    for (const s of seeds) {
      const trace: DecisionTrace = {
        id: newTraceId(),
        requestId: randomUUID(),
        orgId: 'acme',
        apiKeyId: 'acme-rw',
        sessionId: s.session,
        endpoint: 'chat',
        requestedModel: s.model,
        route: 'default',
        strategy: 'ordered',
        candidates: null,
        selectedProvider: 'mock',
        selectedModel: s.model,
        fallbackUsed: s.arm.endsWith('_fallback'),
        attempts: 1,
        failedAttempts: null,
        experimentId,
        experimentArm: s.arm,
        status: s.status ?? 200,
        errorCode: (s.status ?? 200) >= 400 ? 'upstream_error' : null,
        latencyMs: s.latency ?? 100,
        ttftMs: null,
        promptTokens: 10,
        completionTokens: 10,
        reasoningTokens: null,
        costUsd: s.cost === undefined ? 0.001 : s.cost,
        finishReason: 'stop',
        createdAt: new Date(),
      };
      writer.record(trace);
    }
    await writer.flush();
  };
  const seedFeedback = async (rows: Array<[string, number, boolean]>) => {
    for (const [session, score, useful] of rows) {
      await t.app.get(SqlStore).query('INSERT INTO feedback (org_id, session_id, score, useful) VALUES ($1, $2, $3, $4)', ['acme', session, score, useful]);
    }
  };

  let running: string;
  let rolledBack: string;
  let shadow: string;
  beforeAll(async () => {
    running = await create({ type: 'canary', baseline: pair('mock', 'mock-fast'), candidate: pair('mock', 'mock-smart'), traffic_pct: 50, stop_rule: { min_n: 6, max_regression: 0.05 } });
    rolledBack = await create({ type: 'canary', baseline: pair('mock', 'mock-smart'), candidate: pair('mock', 'mock-fast'), traffic_pct: 10 });
    expect((await http(t).post(`/v1/experiments/${rolledBack}/rollback`).set(auth(ADMIN_KEY)).set('x-gateway-confirm', 'experiments')).status).toBe(200);
    shadow = await create({ type: 'shadow', baseline: pair('mock', 'shared'), candidate: pair('alt', 'shared'), traffic_pct: 100 });
  });

  it('lists the organisation\'s experiments newest first, with stop rule, creation and creator; the status filter', async () => {
    const r = await http(t).get('/v1/admin/experiments').set(auth(ADMIN_KEY));
    expect(r.status).toBe(200);
    expect(r.body.next_cursor).toBeNull();
    expect(r.body.data.map((e: any) => e.id)).toEqual([shadow, rolledBack, running]);
    expect(r.body.data[2]).toEqual({
      id: running,
      type: 'canary',
      status: 'active',
      traffic_pct: 50,
      baseline: pair('mock', 'mock-fast'),
      candidate: pair('mock', 'mock-smart'),
      started_at: expect.any(String),
      ended_at: null,
      summary: null,
      stop_rule: { min_n: 6, max_regression: 0.05 },
      created_at: expect.any(String),
      created_by_key_id: 'acme-rw',
    });
    const rolled = await http(t).get('/v1/admin/experiments').query({ status: 'rolled_back' }).set(auth(ADMIN_KEY));
    expect(rolled.body.data.map((e: any) => e.id)).toEqual([rolledBack]);
    const none = await http(t).get('/v1/admin/experiments').query({ status: 'completed' }).set(auth(ADMIN_KEY));
    expect(none.body).toEqual({ data: [], next_cursor: null });
    // Another organisation sees none of them.
    const other = await http(t).get('/v1/admin/experiments').set(auth(OTHER_ADMIN_KEY));
    expect(other.body).toEqual({ data: [], next_cursor: null });
  });

  it('pages with an opaque cursor tied to its filter', async () => {
    const first = await http(t).get('/v1/admin/experiments').query({ limit: 2 }).set(auth(ADMIN_KEY));
    expect(first.body.data.map((e: any) => e.id)).toEqual([shadow, rolledBack]);
    const next = await http(t).get('/v1/admin/experiments').query({ limit: 2, cursor: first.body.next_cursor }).set(auth(ADMIN_KEY));
    expect(next.body).toEqual({ data: [expect.objectContaining({ id: running })], next_cursor: null });
    const mixed = await http(t).get('/v1/admin/experiments').query({ status: 'active', cursor: first.body.next_cursor }).set(auth(ADMIN_KEY));
    expect([mixed.status, mixed.body.error.code, mixed.body.error.param]).toEqual([400, 'invalid_request', 'cursor']);
  });

  it('bad query parameters: 400 invalid_request naming them', async () => {
    for (const [q, param] of [
      [{ status: 'running' }, 'status'],
      [{ limit: '0' }, 'limit'],
      [{ limit: '100000' }, 'limit'],
      [{ type: 'canary' }, 'type'],
    ] as const) {
      const r = await http(t).get('/v1/admin/experiments').query(q).set(auth(ADMIN_KEY));
      expect([r.status, r.body.error.code, r.body.error.param]).toEqual([400, 'invalid_request', param]);
    }
    const detail = await http(t).get(`/v1/admin/experiments/${running}`).query({ verbose: '1' }).set(auth(ADMIN_KEY));
    expect([detail.status, detail.body.error.param]).toEqual([400, 'verbose']);
  });

  it('one experiment: events with actors, per-arm figures from the stop rules, distance to min_n and the quality gap', async () => {
    /*
     * Baseline: sessions 1-4 served (latency 100/200/300/400, cost 1-4 ‰), feedback 8✓ 6✗ 10✓ 4✓; a
     * 502 (an error; its feedback no sample); a 429 (counts neither way).
     *   → samples 4, mean score 7, useful 0.75, error rate 1/5, q = 0.5·0.7 + 0.3·0.75 + 0.2·0.8 = 0.735
     * Candidate: sessions 1-3 served, feedback 5✗ 5✗ 6✗; one fell back to the baseline (an error).
     *   → samples 3, mean score 16/3, useful 0, error rate 1/4, q = 0.5·0.5333 + 0 + 0.2·0.75 = 0.41667
     */
    await seedTraces(running, [
      { arm: 'baseline', session: 'x-b1', latency: 100, cost: 0.001, model: 'mock-fast' },
      { arm: 'baseline', session: 'x-b2', latency: 200, cost: 0.002, model: 'mock-fast' },
      { arm: 'baseline', session: 'x-b3', latency: 300, cost: 0.003, model: 'mock-fast' },
      { arm: 'baseline', session: 'x-b4', latency: 400, cost: 0.004, model: 'mock-fast' },
      { arm: 'baseline', session: 'x-b5', status: 502, latency: 9_000, cost: null, model: 'mock-fast' },
      { arm: 'baseline', session: 'x-b6', status: 429, latency: 1, cost: null, model: 'mock-fast' },
      { arm: 'candidate', session: 'x-c1', latency: 50, model: 'mock-smart' },
      { arm: 'candidate', session: 'x-c2', latency: 50, model: 'mock-smart' },
      { arm: 'candidate', session: 'x-c3', latency: 50, model: 'mock-smart' },
      { arm: 'candidate_fallback', session: 'x-c4', model: 'mock-fast' },
    ]);
    await seedFeedback([
      ['x-b1', 8, true],
      ['x-b2', 6, false],
      ['x-b3', 10, true],
      ['x-b4', 4, true],
      ['x-b5', 0, false],
      ['x-c1', 5, false],
      ['x-c2', 5, false],
      ['x-c3', 6, false],
      ['x-c4', 10, true],
    ]);

    const r = await http(t).get(`/v1/admin/experiments/${running}`).set(auth(ADMIN_KEY));
    expect(r.status).toBe(200);
    expect(r.body.experiment).toMatchObject({ id: running, status: 'active', stop_rule: { min_n: 6, max_regression: 0.05 } });
    expect(r.body.events.map((e: any) => [e.kind, e.actor, e.actor_api_key_id])).toEqual([
      ['created', 'api_key', 'acme-rw'],
      ['started', 'api_key', 'acme-rw'],
    ]);
    expect(r.body.events[0].detail).toMatchObject({ type: 'canary', traffic_pct: 50 });
    expect(r.body.events_next_cursor).toBeNull();

    const b = r.body.arms.baseline;
    expect(b).toMatchObject({ provider: 'mock', model: 'mock-fast', samples: 4, requests: 5, min_n: 6, samples_to_min_n: 2, mean_cost_usd: expect.any(Number) });
    expect(b.quality).toBeCloseTo(0.735, 9);
    expect(b.mean_score).toBeCloseTo(7, 9);
    expect(b.useful_rate).toBeCloseTo(0.75, 9);
    expect(b.error_rate).toBeCloseTo(0.2, 9);
    expect(b.mean_cost_usd).toBeCloseTo(0.0025, 9);
    expect(b.p50_latency_ms).toBeGreaterThan(240);
    expect(b.p50_latency_ms).toBeLessThan(260);
    expect(b.quality_parts).toEqual({ mean_score: b.mean_score, useful_rate: b.useful_rate, success_rate: expect.closeTo(0.8, 9), weights: { score: 0.5, useful: 0.3, success: 0.2 } });
    const c = r.body.arms.candidate;
    expect(c).toMatchObject({ provider: 'mock', model: 'mock-smart', samples: 3, requests: 4, samples_to_min_n: 3 });
    expect(c.quality).toBeCloseTo(0.5 * (16 / 30) + 0.2 * 0.75, 9);

    expect(r.body.stop_rule).toEqual({
      formula: expect.stringContaining('0.5*mean(score/10)'),
      min_n: 6,
      max_regression: 0.05,
      verdict: 'wait',
      quality_gap: expect.closeTo(0.735 - (0.5 * (16 / 30) + 0.2 * 0.75), 9),
      verdict_at_min_n: 'rollback',
    });
    // Never prompt text, keys or hashes.
    expect(r.text).not.toContain(RW_KEY);
  });

  it('a rolled-back experiment shows its rollback event and actor; a shadow with no traffic waits with unknown qualities', async () => {
    const r = await http(t).get(`/v1/admin/experiments/${rolledBack}`).set(auth(ADMIN_KEY));
    expect(r.body.experiment.status).toBe('rolled_back');
    expect(r.body.events.map((e: any) => [e.kind, e.actor_api_key_id])).toEqual([
      ['created', 'acme-rw'],
      ['started', 'acme-rw'],
      ['rolled_back', 'acme-admin'],
    ]);
    const s = await http(t).get(`/v1/admin/experiments/${shadow}`).set(auth(ADMIN_KEY));
    expect(s.body.arms.baseline).toMatchObject({ samples: 0, requests: 0, quality: null, samples_to_min_n: 100, quality_parts: { weights: { success: 1 } } });
    expect(s.body.stop_rule).toMatchObject({ formula: expect.stringContaining('1 - error_rate'), verdict: 'wait', quality_gap: null, verdict_at_min_n: null });

    const events = await http(t).get(`/v1/admin/experiments/${rolledBack}/events`).query({ limit: 2 }).set(auth(ADMIN_KEY));
    expect(events.body.data.map((e: any) => e.kind)).toEqual(['created', 'started']);
    const rest = await http(t).get(`/v1/admin/experiments/${rolledBack}/events`).query({ cursor: events.body.next_cursor, limit: 2 }).set(auth(ADMIN_KEY));
    expect(rest.body).toEqual({ data: [expect.objectContaining({ kind: 'rolled_back', actor: 'api_key' })], next_cursor: null });
  });

  it('another organisation\'s experiment, a missing and a malformed id: byte-identical 404s, on every route', async () => {
    const answers = new Set<string>();
    for (const [key, path] of [
      [OTHER_ADMIN_KEY, `/v1/admin/experiments/${running}`],
      [OTHER_ADMIN_KEY, `/v1/admin/experiments/${running}/events`],
      [ADMIN_KEY, `/v1/admin/experiments/${randomUUID()}`],
      [ADMIN_KEY, '/v1/admin/experiments/not-a-uuid'],
      [ADMIN_KEY, '/v1/admin/experiments/not-a-uuid/events'],
      [ADMIN_KEY, '/v1/admin/experiments/constructor'],
    ]) {
      const r = await http(t).get(path).set(auth(key));
      answers.add(`${r.status} ${r.text}`);
    }
    expect([...answers]).toEqual([`404 ${JSON.stringify({ error: { type: 'error', code: 'not_found', message: 'No experiment with this id in the organisation.' } })}`]);
    expect(running).toMatch(UUID);
  });

  it('403 admin_permission for a read/write key, 401 without a key', async () => {
    for (const path of ['/v1/admin/experiments', `/v1/admin/experiments/${running}`, `/v1/admin/experiments/${running}/events`]) {
      expect((await http(t).get(path)).status).toBe(401);
      const r = await http(t).get(`${path}?limit=0`).set(auth(RW_KEY));
      expect([r.status, r.body.error.code]).toEqual([403, 'admin_permission']);
    }
  });
});
