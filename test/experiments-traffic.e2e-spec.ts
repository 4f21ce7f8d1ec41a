/**
 * Experiments in the traffic (docs/architecture.md "Experiments in the chat path", "Stop rules"):
 * the canary split and its stickiness, shadow copies that never touch the client's response,
 * rollback and the kill switch taking effect on the next request (also across two replicas sharing
 * a real Postgres and Redis), and the stop-rule job on seeded traces and feedback (PGlite and real
 * Postgres). The service-level suites drive ExperimentRouter, the shadow runner and the job inside
 * the real AppModule; the "through chat" suite needs ChatService to call ExperimentRouter.apply.
 */
import { Global, Module, Type } from '@nestjs/common';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Caller } from '../src/common/http/request-context';
import { ExperimentShadowRunner } from '../src/experiments/experiment-shadow.runner';
import { ExperimentStopRulesJob, ExperimentStopRulesOptions } from '../src/experiments/experiment-stop-rules.job';
import { ExperimentRouter } from '../src/experiments/experiment.router';
import { ExperimentsRepository } from '../src/experiments/experiments.repository';
import { ExperimentsOptions } from '../src/experiments/experiments.service';
import { SqlStore } from '../src/stores/sql/sql-store';
import { DecisionTraceWriter, type DecisionTrace } from '../src/traces/decision-trace.writer';
import { newTraceId } from '../src/traces/trace-id';
import { KILLED_KEY, PRO_KEY, startTestApp, TestApp } from './support/app';
import { readReply } from './support/http-check';
import { createTestDatabase, TestDatabase } from './support/postgres';
import { describeWithPostgres, describeWithRedis, TEST_REDIS_URL } from './support/real-servers';

const SLOW_MS = 1_500;
const BASELINES = Array.from({ length: 14 }, (_, i) => `b${i + 1}`);
const CANDIDATES = Array.from({ length: 14 }, (_, i) => `c${i + 1}`);

/**
 * Baselines b1..b14 and candidates c1..c14 (one pair per test, so no test sees another's experiment),
 * a slow candidate, and a failing one on a provider of its own (its failures charge only that breaker).
 */
function yaml(org = 'acme'): string {
  const cost = 'cost: { input_per_mtok: 1, output_per_mtok: 2 }';
  return `
providers:
  mock: { family: mock }
  flaky: { family: mock }
models:
${[...BASELINES, ...CANDIDATES].map((m) => `  ${m}: { provider: mock, type: chat, ${cost} }`).join('\n')}
  slowc: { provider: mock, type: chat, upstream: "slowc+slow-${SLOW_MS}", ${cost} }
  badc: { provider: flaky, type: chat, upstream: "badc+error-503" }
routes:
  - { name: default, models: [auto], targets: [mock/b1] }
organizations:
  ${org}:
    plan: pro
    features: [has_test_ab, feedback_routing, explain]
    api_keys: [ { id: ${org}-rw, key: "${PRO_KEY}", permissions: [read, write] } ]
  killco:
    plan: pro
    features: [has_test_ab, feedback_routing, explain]
    kill_switches: [experiments]
    api_keys: [ { id: killed-rw, key: "${KILLED_KEY}" } ]
`;
}

/** Option providers for the experiments module, visible to it through a global module. */
function experimentOptions(o: { activeCacheTtlMs?: number } = {}): Type<unknown> {
  const providers = [
    // The tests run the stop-rule job themselves: its timer must not move an experiment behind their back.
    { provide: ExperimentStopRulesOptions, useValue: { intervalMs: 0 } },
    { provide: ExperimentsOptions, useValue: { activeCacheTtlMs: o.activeCacheTtlMs } },
  ];
  @Global()
  @Module({ providers, exports: providers.map((p) => p.provide) })
  class ExperimentTestOptions {}
  return ExperimentTestOptions;
}

const caller = (orgId = 'acme', overrides: Partial<Caller> = {}): Caller => ({
  orgId,
  keyId: `${orgId}-rw`,
  plan: 'pro',
  features: ['has_test_ab', 'feedback_routing', 'explain'],
  permissions: ['read', 'write'],
  killSwitches: [],
  monthlyRequestLimit: null,
  ...overrides,
});
const mock = (model: string) => ({ provider: 'mock', model });

interface Reply {
  status: number;
  json: any;
  headers: Headers;
  ms: number;
}

async function http(base: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> {
  const h: Record<string, string> = { authorization: `Bearer ${PRO_KEY}`, ...headers };
  if (method === 'POST' && path.startsWith('/v1/experiments')) h['x-gateway-confirm'] = 'experiments';
  if (body !== undefined) h['content-type'] = 'application/json';
  const started = performance.now();
  const res = await fetch(base + path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  const { status, json, headers: replyHeaders } = await readReply(res);
  return { status, json, headers: replyHeaders, ms: performance.now() - started };
}

async function createExperiment(base: string, body: Record<string, unknown>): Promise<string> {
  const r = await http(base, 'POST', '/v1/experiments', body);
  if (r.status !== 201) throw new Error(`create failed: ${r.status} ${JSON.stringify(r.json)}`);
  return r.json.id as string;
}

const rollback = (base: string, id: string) => http(base, 'POST', `/v1/experiments/${id}/rollback`);

async function experiment(base: string, id: string): Promise<any> {
  const r = await http(base, 'GET', '/v1/experiments');
  return (r.json as any[]).find((e) => e.id === id);
}

async function tracesOf(t: TestApp, where: { experimentId?: string; requestId?: string }): Promise<any[]> {
  await t.app.get(DecisionTraceWriter).flush();
  const { rows } = await t.app
    .get(SqlStore)
    .query(
      `SELECT request_id, session_id, selected_model, experiment_id, experiment_arm, status, error_code, latency_ms, prompt_tokens, completion_tokens, cost_usd
       FROM decision_traces WHERE ($1::uuid IS NULL OR experiment_id = $1::uuid) AND ($2::text IS NULL OR request_id = $2) ORDER BY id`,
      [where.experimentId ?? null, where.requestId ?? null],
    );
  return rows;
}

describe('ExperimentRouter.apply with the real stores', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ yaml: yaml(), modules: [experimentOptions()] });
  });
  afterAll(() => t.close());
  const router = () => t.app.get(ExperimentRouter);

  it('canary: 2,000 sessions at 30 % → 30 % ± 4 % on the candidate (baseline kept behind it), sticky per session', async () => {
    const id = await createExperiment(t.url, { type: 'canary', baseline: mock('b1'), candidate: mock('c1'), traffic_pct: 30 });
    const arms = new Map<string, string | null>();
    for (let i = 0; i < 2_000; i++) {
      const s = await router().apply(caller(), { plan: [mock('b1')] }, `canary-${i}`, randomUUID());
      expect(s.experimentId).toBe(id);
      expect(s.plan).toEqual(s.arm === 'candidate' ? [mock('c1'), mock('b1')] : [mock('b1')]);
      arms.set(`canary-${i}`, s.arm);
    }
    const pct = ([...arms.values()].filter((a) => a === 'candidate').length / 2_000) * 100;
    expect(pct).toBeGreaterThanOrEqual(26);
    expect(pct).toBeLessThanOrEqual(34);
    for (let i = 0; i < 2_000; i += 5) {
      expect((await router().apply(caller(), { plan: [mock('b1')] }, `canary-${i}`, randomUUID())).arm).toBe(arms.get(`canary-${i}`));
    }
    // Another baseline is not in the experiment.
    expect(await router().apply(caller(), { plan: [mock('b2')] }, 'canary-1', 'r')).toEqual({ plan: [mock('b2')], experimentId: null, arm: null });
  });

  it('no session id: split by request id (the same request id lands alike, the share holds)', async () => {
    await createExperiment(t.url, { type: 'canary', baseline: mock('b3'), candidate: mock('c3'), traffic_pct: 30 });
    let candidate = 0;
    for (let i = 0; i < 2_000; i++) {
      const a = await router().apply(caller(), { plan: [mock('b3')] }, null, `rid-${i}`);
      const b = await router().apply(caller(), { plan: [mock('b3')] }, null, `rid-${i}`);
      expect(b.arm).toBe(a.arm);
      if (a.arm === 'candidate') candidate++;
    }
    expect(candidate / 20).toBeGreaterThanOrEqual(26);
    expect(candidate / 20).toBeLessThanOrEqual(34);
  });

  it('a rollback through the API returns traffic to the baseline on the next request', async () => {
    const id = await createExperiment(t.url, { type: 'canary', baseline: mock('b4'), candidate: mock('c4'), traffic_pct: 100 });
    expect((await router().apply(caller(), { plan: [mock('b4')] }, 's', 'r')).arm).toBe('candidate');
    expect((await rollback(t.url, id)).status).toBe(200);
    expect(await router().apply(caller(), { plan: [mock('b4')] }, 's', 'r')).toEqual({ plan: [mock('b4')], experimentId: null, arm: null });
  });

  it('the kill switch returns traffic to the baseline on the next request, and back when it is off', async () => {
    const id = await createExperiment(t.url, { type: 'canary', baseline: mock('b5'), candidate: mock('c5'), traffic_pct: 100 });
    expect((await router().apply(caller(), { plan: [mock('b5')] }, 's', 'r')).experimentId).toBe(id);
    expect(await router().apply(caller('acme', { killSwitches: ['experiments'] }), { plan: [mock('b5')] }, 's', 'r')).toEqual({ plan: [mock('b5')], experimentId: null, arm: null });
    expect((await router().apply(caller(), { plan: [mock('b5')] }, 's', 'r')).arm).toBe('candidate');
  });
});

describe('shadow copies (service level, real adapters and trace writer)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ yaml: yaml(), modules: [experimentOptions()] });
  });
  afterAll(() => t.close());

  it('shadow() returns at once while a slow candidate runs; the candidate outcome is its own trace', async () => {
    const id = await createExperiment(t.url, { type: 'shadow', baseline: mock('b6'), candidate: mock('slowc'), traffic_pct: 100 });
    const router = t.app.get(ExperimentRouter);
    const split = await router.apply(caller(), { plan: [mock('b6')] }, 'shadow-s1', 'shadow-r1');
    expect(split).toEqual({ plan: [mock('b6')], experimentId: id, arm: 'baseline', shadow: { experimentId: id, target: mock('slowc') } });
    const started = performance.now();
    const call = {
      caller: caller(),
      requestId: 'shadow-r1',
      requestedModel: 'b6',
      route: 'b6',
      strategy: 'direct',
      request: { messages: [{ role: 'user' as const, content: 'four words of prompt' }] },
      supports: () => undefined,
    };
    expect(router.shadow(split, mock('b6'), call)).toBe(true);
    expect(performance.now() - started).toBeLessThan(50);
    expect(t.app.get(ExperimentShadowRunner).inFlight).toBe(1);
    await t.app.get(ExperimentShadowRunner).idle();
    expect(performance.now() - started).toBeGreaterThanOrEqual(SLOW_MS - 50);
    const rows = await tracesOf(t, { experimentId: id });
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ request_id: 'shadow-r1', session_id: null, selected_model: 'slowc', experiment_arm: 'candidate', status: 200, error_code: null });
    expect(rows[0].latency_ms).toBeGreaterThanOrEqual(SLOW_MS - 50);
    expect(rows[0].prompt_tokens).toBeGreaterThan(0);
    expect(rows[0].cost_usd).toBeGreaterThan(0);
  });
});

// ---------------------------------------------------------------------------------------------
// Stop rules on seeded traces and feedback.

type TraceSeed = { arm: string; session: string | null; status?: number; latency?: number; cost?: number | null; model: string };

function seedTraces(t: TestApp, experimentId: string, orgId: string, seeds: TraceSeed[]): Promise<void> {
  const writer = t.app.get(DecisionTraceWriter);
  for (const s of seeds) {
    const trace: DecisionTrace = {
      id: newTraceId(),
      requestId: randomUUID(),
      orgId,
      apiKeyId: `${orgId}-rw`,
      sessionId: s.session,
      endpoint: 'chat',
      requestedModel: s.model,
      route: s.model,
      strategy: 'direct',
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
  return writer.flush();
}

async function seedFeedback(t: TestApp, orgId: string, rows: Array<[session: string, score: number, useful: boolean]>): Promise<void> {
  for (const [session, score, useful] of rows) {
    await t.app.get(SqlStore).query('INSERT INTO feedback (org_id, session_id, score, useful) VALUES ($1, $2, $3, $4)', [orgId, session, score, useful]);
  }
}

/**
 * The baseline arm every stop-rule case shares (prefix p keeps sessions apart):
 *   sessions 1-4 served: latency 100/200/300/400, cost 1/2/3/4 ‰ USD, feedback 8✓ 6✗ 10✓ 4✓
 *   session 5: a 502 of the baseline (an error; its feedback 0✗ is no sample)
 *   one 429 (the limits' doing: counts neither way)
 * → samples 4, mean score 7, useful 0.75, error rate 1/5, p50 250, mean cost 0.0025,
 *   q = 0.5·0.7 + 0.3·0.75 + 0.2·0.8 = 0.735
 */
function baselineArm(p: string, model: string): { traces: TraceSeed[]; feedback: Array<[string, number, boolean]> } {
  return {
    traces: [
      { arm: 'baseline', session: `${p}-b1`, latency: 100, cost: 0.001, model },
      { arm: 'baseline', session: `${p}-b2`, latency: 200, cost: 0.002, model },
      { arm: 'baseline', session: `${p}-b3`, latency: 300, cost: 0.003, model },
      { arm: 'baseline', session: `${p}-b4`, latency: 400, cost: 0.004, model },
      { arm: 'baseline', session: `${p}-b5`, status: 502, latency: 9_000, cost: null, model },
      { arm: 'baseline', session: `${p}-b6`, status: 429, latency: 1, cost: null, model },
    ],
    feedback: [
      [`${p}-b1`, 8, true],
      [`${p}-b2`, 6, false],
      [`${p}-b3`, 10, true],
      [`${p}-b4`, 4, true],
      [`${p}-b5`, 0, false],
    ],
  };
}

function stopRuleSuite(name: string, env: () => Record<string, string>): void {
  describe(name, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await startTestApp({ yaml: yaml(), env: env(), modules: [experimentOptions()] });
    });
    afterAll(() => t?.close());
    const job = () => t.app.get(ExperimentStopRulesJob);
    const outcomeOf = async (id: string) => (await job().run()).find((o) => o.experimentId === id);
    const events = async (id: string) =>
      (await t.app.get(SqlStore).query<{ kind: string; actor_api_key_id: string | null; detail: any }>('SELECT kind, actor_api_key_id, detail FROM experiment_events WHERE experiment_id = $1 ORDER BY id', [id])).rows;
    const regressions = async (model: string) =>
      (await t.app.get(SqlStore).query<{ org_id: string; provider: string; reason: string; detail: any }>('SELECT org_id, provider, reason, detail FROM regressions WHERE model = $1', [model])).rows;

    it('nothing happens while an arm is below min_n (fallen-back and failed requests are no samples)', async () => {
      const id = await createExperiment(t.url, { type: 'canary', baseline: mock('b7'), candidate: mock('c7'), traffic_pct: 50, stop_rule: { min_n: 4, max_regression: 0.05 } });
      const base = baselineArm('wait', 'b7');
      await seedTraces(t, id, 'acme', [
        ...base.traces,
        { arm: 'candidate', session: 'wait-c1', model: 'c7' },
        { arm: 'candidate', session: 'wait-c2', model: 'c7' },
        { arm: 'candidate', session: 'wait-c3', model: 'c7' },
        // Fell back across arms, failed, or without feedback: none of them is a fourth sample.
        { arm: 'candidate_fallback', session: 'wait-c4', model: 'b7' },
        { arm: 'candidate', session: 'wait-c5', status: 502, model: 'c7' },
        { arm: 'candidate', session: 'wait-c6', model: 'c7' },
        { arm: 'candidate', session: null, model: 'c7' },
      ]);
      await seedFeedback(t, 'acme', [...base.feedback, ['wait-c1', 9, true], ['wait-c2', 9, true], ['wait-c3', 9, true], ['wait-c4', 9, true], ['wait-c5', 9, true]]);
      expect(await outcomeOf(id)).toMatchObject({ result: 'waiting', verdict: { action: 'wait', samples: { baseline: 4, candidate: 3 } } });
      expect((await experiment(t.url, id)).status).toBe('active');
      expect((await events(id)).map((e) => e.kind)).toEqual(['created', 'started']);
      expect(await regressions('c7')).toEqual([]);
    });

    it('completion: the candidate within max_regression → completed, summary filled with the per-arm values', async () => {
      const id = await createExperiment(t.url, { type: 'canary', baseline: mock('b8'), candidate: mock('c8'), traffic_pct: 50, stop_rule: { min_n: 4, max_regression: 0.05 } });
      const base = baselineArm('done', 'b8');
      /*
       * Candidate: sessions 1-4 served (session 3 twice), latency 50/150/250/350/450, cost 1 ‰ each,
       * feedback 9✓ 7✓ 8✗ 6✓; session 5 fell back to the baseline (a candidate failure, no sample, its
       * 0✗ not counted); a trace of another experiment in session 1 is not this one's.
       * → samples 4, mean score 7.5, useful 0.75, error rate 1/6, p50 250, mean cost 0.001,
       *   q = 0.5·0.75 + 0.3·0.75 + 0.2·(5/6) = 0.7666…
       */
      await seedTraces(t, id, 'acme', [
        ...base.traces,
        { arm: 'candidate', session: 'done-c1', latency: 50, model: 'c8' },
        { arm: 'candidate', session: 'done-c2', latency: 150, model: 'c8' },
        { arm: 'candidate', session: 'done-c3', latency: 250, model: 'c8' },
        { arm: 'candidate', session: 'done-c3', latency: 350, model: 'c8' },
        { arm: 'candidate', session: 'done-c4', latency: 450, model: 'c8' },
        { arm: 'candidate_fallback', session: 'done-c5', latency: 5_000, cost: 0.5, model: 'b8' },
      ]);
      await seedTraces(t, randomUUID(), 'acme', [{ arm: 'candidate', session: 'done-c1', status: 502, model: 'c8' }]);
      await seedFeedback(t, 'acme', [...base.feedback, ['done-c1', 9, true], ['done-c2', 7, true], ['done-c3', 8, false], ['done-c4', 6, true], ['done-c5', 0, false]]);

      expect(await outcomeOf(id)).toMatchObject({ result: 'completed' });
      const e = await experiment(t.url, id);
      expect(e.status).toBe('completed');
      expect(e.ended_at).toEqual(expect.any(String));
      expect(e.summary.baseline).toEqual({
        provider: 'mock', model: 'b8', samples: 4, requests: 5, quality: expect.closeTo(0.735, 9), mean_score: expect.closeTo(7, 9),
        useful_rate: 0.75, error_rate: expect.closeTo(0.2, 9), p50_latency_ms: 250, mean_cost_usd: expect.closeTo(0.0025, 12),
      });
      expect(e.summary.candidate).toEqual({
        provider: 'mock', model: 'c8', samples: 4, requests: 6, quality: expect.closeTo(0.5 * 0.75 + 0.3 * 0.75 + 0.2 * (5 / 6), 9), mean_score: expect.closeTo(7.5, 9),
        useful_rate: 0.75, error_rate: expect.closeTo(1 / 6, 9), p50_latency_ms: 250, mean_cost_usd: expect.closeTo(0.001, 12),
      });
      expect(e.summary).toMatchObject({ min_n: 4, max_regression: 0.05, quality_delta: expect.closeTo(0.5 * 0.75 + 0.3 * 0.75 + 0.2 * (5 / 6) - 0.735, 9) });
      expect((await events(id)).map((x) => [x.kind, x.actor_api_key_id, x.detail?.actor ?? null])).toEqual([
        ['created', 'acme-rw', null],
        ['started', 'acme-rw', null],
        ['completed', null, 'system'],
      ]);
      expect(await regressions('c8')).toEqual([]);
      // The next round leaves it alone.
      expect(await outcomeOf(id)).toBeUndefined();
    });

    it('rollback: the candidate worse by more than max_regression → rolled_back by system, regression recorded', async () => {
      const id = await createExperiment(t.url, { type: 'canary', baseline: mock('b9'), candidate: mock('c9'), traffic_pct: 50, stop_rule: { min_n: 4, max_regression: 0.05 } });
      const base = baselineArm('bad', 'b9');
      // Candidate feedback 3✗ 4✗ 5✓ 2✗, no errors → q = 0.5·0.35 + 0.3·0.25 + 0.2·1 = 0.45, 0.285 below 0.735.
      await seedTraces(t, id, 'acme', [
        ...base.traces,
        ...[1, 2, 3, 4].map((i) => ({ arm: 'candidate', session: `bad-c${i}`, model: 'c9' })),
      ]);
      await seedFeedback(t, 'acme', [...base.feedback, ['bad-c1', 3, false], ['bad-c2', 4, false], ['bad-c3', 5, true], ['bad-c4', 2, false]]);

      expect(await outcomeOf(id)).toMatchObject({ result: 'rolled_back' });
      const e = await experiment(t.url, id);
      expect(e.status).toBe('rolled_back');
      expect(e.summary.candidate).toMatchObject({ samples: 4, quality: expect.closeTo(0.45, 9), useful_rate: 0.25, error_rate: 0 });
      expect(e.summary.quality_delta).toBeCloseTo(0.45 - 0.735, 9);
      expect((await events(id)).slice(2).map((x) => [x.kind, x.actor_api_key_id, x.detail])).toEqual([
        ['rolled_back', null, { actor: 'system', reason: 'stop_rule_regression', from: 'active' }],
      ]);
      expect(await regressions('c9')).toEqual([
        {
          org_id: 'acme',
          provider: 'mock',
          reason: 'experiment_rolled_back',
          detail: { experiment_id: id, experiment_type: 'canary', baseline: mock('b9'), actor: 'system', reason: 'stop_rule_regression' },
        },
      ]);
      // Traffic is back on the baseline.
      expect((await t.app.get(ExperimentRouter).apply(caller(), { plan: [mock('b9')] }, 'bad-c1', 'r')).experimentId).toBeNull();
    });

    it('a manual rollback records a regression for the candidate too', async () => {
      const id = await createExperiment(t.url, { type: 'canary', baseline: mock('b10'), candidate: mock('c10'), traffic_pct: 10 });
      await rollback(t.url, id);
      await rollback(t.url, id);
      expect((await regressions('c10')).map((r) => [r.reason, r.detail.actor, r.detail.experiment_id])).toEqual([['experiment_rolled_back', 'acme-rw', id]]);
    });

    it('shadow: compared on the error rate over requests once both arms have min_n of them', async () => {
      const id = await createExperiment(t.url, { type: 'shadow', baseline: mock('b11'), candidate: mock('c11'), traffic_pct: 100, stop_rule: { min_n: 5, max_regression: 0.1 } });
      const base = (n: number): TraceSeed[] => Array.from({ length: n }, (_, i) => ({ arm: 'baseline', session: `sh-${i}`, model: 'b11' }));
      const cand = (ok: number, failed: number): TraceSeed[] => [
        ...Array.from({ length: ok }, () => ({ arm: 'candidate', session: null, model: 'c11' })),
        ...Array.from({ length: failed }, () => ({ arm: 'candidate', session: null, status: 504, model: 'c11' })),
      ];
      await seedTraces(t, id, 'acme', [...base(5), ...cand(3, 1)]);
      expect(await outcomeOf(id)).toMatchObject({ result: 'waiting', verdict: { samples: { baseline: 5, candidate: 4 } } });
      // 4 ok + 2 timeouts of 6: q 0.666… against 1 → rolled back.
      await seedTraces(t, id, 'acme', cand(1, 1));
      expect(await outcomeOf(id)).toMatchObject({ result: 'rolled_back' });
      expect((await experiment(t.url, id)).summary.candidate).toMatchObject({ samples: 6, quality: expect.closeTo(4 / 6, 9), useful_rate: null });
    });
  });
}

stopRuleSuite('stop-rule job on seeded traces and feedback (PGlite)', () => ({}));

describeWithPostgres('stop-rule job on real Postgres', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });
  stopRuleSuite('stop-rule job on seeded traces and feedback (Postgres)', () => ({ DATABASE_URL: db.url, GATEWAY_KEY_PEPPER: 'experiments-traffic-pepper' }));

  describeWithRedis('two replicas sharing Postgres and Redis', () => {
    // An organisation of its own: other suites on the same Redis never touch its version token.
    const org = `xrep${randomBytes(4).toString('hex')}`;
    let shared: TestDatabase;
    let a: TestApp;
    let b: TestApp;
    beforeAll(async () => {
      shared = await createTestDatabase();
      const env = { DATABASE_URL: shared.url, GATEWAY_KEY_PEPPER: 'experiments-traffic-pepper', REDIS_URL: TEST_REDIS_URL! };
      // A 60 s list cache: only the shared version token can make replica A see B's rollback in time.
      a = await startTestApp({ yaml: yaml(org), env, modules: [experimentOptions({ activeCacheTtlMs: 60_000 })] });
      b = await startTestApp({ yaml: yaml(org), env, modules: [experimentOptions({ activeCacheTtlMs: 60_000 })] });
    });
    afterAll(async () => {
      await a?.close();
      await b?.close();
      await shared?.drop();
    });

    it("a rollback on replica B returns replica A's traffic to the baseline on A's next request", async () => {
      const id = await createExperiment(a.url, { type: 'canary', baseline: mock('b12'), candidate: mock('c12'), traffic_pct: 100 });
      const ra = a.app.get(ExperimentRouter);
      expect((await ra.apply(caller(org), { plan: [mock('b12')] }, 's', 'r')).experimentId).toBe(id);
      expect((await b.app.get(ExperimentRouter).apply(caller(org), { plan: [mock('b12')] }, 's', 'r')).arm).toBe('candidate');
      expect((await rollback(b.url, id)).json.status).toBe('rolled_back');
      expect(await ra.apply(caller(org), { plan: [mock('b12')] }, 's', 'r')).toEqual({ plan: [mock('b12')], experimentId: null, arm: null });
    });

    it('both replicas run the stop rules at once: exactly one completes the experiment, one event is written', async () => {
      const id = await createExperiment(a.url, { type: 'canary', baseline: mock('b13'), candidate: mock('c13'), traffic_pct: 50, stop_rule: { min_n: 1, max_regression: 0.05 } });
      await seedTraces(a, id, org, [
        { arm: 'baseline', session: 'race-b', model: 'b13' },
        { arm: 'candidate', session: 'race-c', model: 'c13' },
      ]);
      await seedFeedback(a, org, [
        ['race-b', 8, true],
        ['race-c', 8, true],
      ]);
      const [ra, rb] = await Promise.all([a.app.get(ExperimentStopRulesJob).run(), b.app.get(ExperimentStopRulesJob).run()]);
      const results = [...ra, ...rb].filter((o) => o.experimentId === id).map((o) => o.result);
      expect(results.filter((r) => r === 'completed')).toHaveLength(1);
      expect(results.every((r) => r === 'completed' || r === 'ended_elsewhere')).toBe(true);
      const { rows } = await a.app.get(SqlStore).query<{ kind: string }>('SELECT kind FROM experiment_events WHERE experiment_id = $1 ORDER BY id', [id]);
      expect(rows.map((r) => r.kind)).toEqual(['created', 'started', 'completed']);
      // Replica B's next request sees it ended (its list was cached for 60 s).
      expect((await b.app.get(ExperimentRouter).apply(caller(org), { plan: [mock('b13')] }, 'race-c', 'r')).experimentId).toBeNull();
    });
  });
});

// ---------------------------------------------------------------------------------------------
// Through POST /v1/chat/completions: these need ChatService to call ExperimentRouter (apply after
// routing, traceArm on the trace, shadow after a successful baseline response).

describe('through chat (needs the ChatService hook)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ yaml: yaml(), modules: [experimentOptions()] });
  });
  afterAll(() => t.close());
  const chat = (model: string, session: string | null, key = PRO_KEY) =>
    http(t.url, 'POST', '/v1/chat/completions', { model, messages: [{ role: 'user', content: 'a b c' }] }, {
      authorization: `Bearer ${key}`,
      'x-request-id': `req-${randomUUID()}`,
      ...(session ? { 'gateway-session-id': session } : {}),
    });
  const served = (r: Reply) => r.headers.get('gateway-model');

  it('canary: the candidate serves its share, sticky per session; traces carry the experiment and the arm', async () => {
    const id = await createExperiment(t.url, { type: 'canary', baseline: mock('b1'), candidate: mock('c1'), traffic_pct: 50 });
    const bySession = new Map<string, string | null>();
    for (let i = 0; i < 40; i++) {
      const r = await chat('b1', `chat-sticky-${i}`);
      expect(r.status).toBe(200);
      expect(r.json.model).toBe(served(r));
      bySession.set(`chat-sticky-${i}`, served(r));
    }
    const models = new Set(bySession.values());
    expect(models).toEqual(new Set(['b1', 'c1']));
    for (let i = 0; i < 40; i += 3) expect(served(await chat('b1', `chat-sticky-${i}`))).toBe(bySession.get(`chat-sticky-${i}`));
    const rows = await tracesOf(t, { experimentId: id });
    expect(rows.length).toBeGreaterThanOrEqual(40);
    for (const row of rows) expect(row.experiment_arm).toBe(row.selected_model === 'c1' ? 'candidate' : 'baseline');
  });

  it('streams follow the split too', async () => {
    const id = await createExperiment(t.url, { type: 'canary', baseline: mock('b7'), candidate: mock('c7'), traffic_pct: 100 });
    const res = await fetch(`${t.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${PRO_KEY}`, 'content-type': 'application/json', 'gateway-session-id': 'chat-stream-1' },
      body: JSON.stringify({ model: 'b7', stream: true, messages: [{ role: 'user', content: 'a b c' }] }),
    });
    const text = await res.text();
    expect([res.status, res.headers.get('gateway-model')]).toEqual([200, 'c7']);
    expect(text).toContain('data: [DONE]');
    const rows = await tracesOf(t, { experimentId: id });
    expect(rows.map((x) => [x.selected_model, x.experiment_arm, x.session_id])).toEqual([['c7', 'candidate', 'chat-stream-1']]);
  });

  it('a failing candidate falls back to the baseline; the trace is flagged candidate_fallback (no sample of either arm)', async () => {
    const id = await createExperiment(t.url, { type: 'canary', baseline: mock('b2'), candidate: { provider: 'flaky', model: 'badc' }, traffic_pct: 100 });
    const r = await chat('b2', 'chat-fallback-1');
    expect([r.status, served(r), r.headers.get('gateway-fallback-used')]).toEqual([200, 'b2', 'true']);
    const rows = await tracesOf(t, { experimentId: id });
    expect(rows.map((x) => [x.selected_model, x.experiment_arm, x.status])).toEqual([['b2', 'candidate_fallback', 200]]);
  });

  it('shadow: the response is the baseline answer, not delayed by a slow candidate; the candidate trace is recorded', async () => {
    const id = await createExperiment(t.url, { type: 'shadow', baseline: mock('b3'), candidate: mock('slowc'), traffic_pct: 100 });
    const plain = await chat('b4', 'chat-shadow-control');
    const r = await chat('b3', 'chat-shadow-1');
    expect([r.status, served(r), r.json.model]).toEqual([200, 'b3', 'b3']);
    expect(r.json.choices[0].message.content).toBe(plain.json.choices[0].message.content.replace('b4', 'b3'));
    expect(Object.keys(r.json).sort()).toEqual(Object.keys(plain.json).sort());
    expect(r.ms).toBeLessThan(SLOW_MS / 2);
    await t.app.get(ExperimentShadowRunner).idle();
    const rows = await tracesOf(t, { experimentId: id });
    expect(rows.map((x) => [x.selected_model, x.experiment_arm, x.status, x.session_id])).toEqual([
      ['b3', 'baseline', 200, 'chat-shadow-1'],
      ['slowc', 'candidate', 200, null],
    ]);
    expect(rows[1].request_id).toBe(rows[0].request_id);
    expect(rows[1].latency_ms).toBeGreaterThanOrEqual(SLOW_MS - 50);
  });

  it('a rollback returns the next chat request to the baseline, with no experiment on its trace', async () => {
    const id = await createExperiment(t.url, { type: 'canary', baseline: mock('b5'), candidate: mock('c5'), traffic_pct: 100 });
    expect(served(await chat('b5', 'chat-rb-1'))).toBe('c5');
    await rollback(t.url, id);
    const r = await chat('b5', 'chat-rb-1');
    expect(served(r)).toBe('b5');
    const rows = await tracesOf(t, { requestId: r.headers.get('x-request-id')! });
    expect(rows.map((x) => [x.experiment_id, x.experiment_arm])).toEqual([[null, null]]);
  });

  it('the kill switch keeps an organisation on the baseline', async () => {
    const repo = t.app.get(ExperimentsRepository);
    await repo.transaction((tx) =>
      repo.insertActive(
        { orgId: 'killco', type: 'canary', trafficPct: 100, baseline: mock('b6'), candidate: mock('c6'), stopRule: { minN: 100, maxRegression: 0.05 }, createdByKeyId: 'killed-rw' },
        tx,
      ),
    );
    const r = await chat('b6', 'chat-kill-1', KILLED_KEY);
    expect([r.status, served(r)]).toEqual([200, 'b6']);
  });
});
