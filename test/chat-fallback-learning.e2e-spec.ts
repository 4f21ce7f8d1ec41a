import OpenAI from 'openai';
import { AggregationJob } from '../src/learning/aggregation.job';
import { StatsSnapshot } from '../src/learning/model-stats';
import { SqlStore } from '../src/stores/sql/sql-store';
import { DecisionTraceWriter } from '../src/traces/decision-trace.writer';
import { OpenAiFake } from './fakes/openai-fake';
import { startTestApp, TestApp } from './support/app';

/**
 * A target that fails and is rescued by fallback is still a failure to the learning loop (README
 * "Feedback and the learning loop"): chat's decision traces record the failed attempts, and the
 * aggregation job counts each as a failed request of its target, so the `auto` signal's success rate
 * of a provider that fails behind a fallback falls below 1.
 */
const KEY = 'gw-fallback-learning-rw';
const SECRET_PROMPT = 'the prompt text that must never be stored';
const yaml = (flakyUrl: string, steadyUrl: string) => `
providers:
  flaky: { family: openai, base_url: "${flakyUrl}", api_key: "sk-flaky-secret" }
  steady: { family: openai, base_url: "${steadyUrl}", api_key: "sk-steady-secret" }
models:
  f: { provider: flaky, upstream: flaky-upstream }
  s: { provider: steady, upstream: steady-upstream }
routes:
  - { name: main, models: [auto], strategy: ordered, targets: [flaky/f, steady/s] }
learning: { refresh_seconds: 3600 }
organizations:
  acme:
    plan: pro
    api_keys: [ { id: acme-rw, key: "${KEY}", permissions: [read, write] } ]
`;

interface TraceRow {
  selected_provider: string | null;
  status: number;
  error_code: string | null;
  fallback_used: boolean;
  attempts: number;
  failed_attempts: unknown;
}

describe('failed fallback attempts reach the learning loop (chat, official client)', () => {
  const flaky = new OpenAiFake({ variant: 'openai' });
  const steady = new OpenAiFake({ variant: 'openai' });
  let t: TestApp;
  let c: OpenAI;

  beforeAll(async () => {
    await flaky.start();
    await steady.start();
    t = await startTestApp({ yaml: yaml(flaky.url, steady.url) });
    c = new OpenAI({ apiKey: KEY, baseURL: `${t.url}/v1`, maxRetries: 0, defaultHeaders: { 'gateway-session-id': 'fb-1' } });
  });
  afterAll(async () => {
    await t?.close();
    await flaky.stop();
    await steady.stop();
  });

  it('records the failed first target on the trace and counts it in the stats after the job runs', async () => {
    const messages = [{ role: 'user' as const, content: SECRET_PROMPT }];
    // JSON: the first target answers 503, the fallback serves.
    flaky.next({ errorStatus: 503 });
    steady.next({ text: 'steady answer' });
    const json = await c.chat.completions.create({ model: 'auto', messages }).withResponse();
    expect([json.data.model, json.response.headers.get('gateway-fallback-used')]).toEqual(['s', 'true']);

    // Stream: the first target answers 502 before any output, the fallback serves (held stream, docs/api.md "Streaming").
    flaky.next({ errorStatus: 502 });
    steady.next({ text: 'streamed answer' });
    const stream = await c.chat.completions.create({ model: 'auto', messages, stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBe('streamed answer');

    // The only target fails: the client gets 502, and the trace still names what failed.
    flaky.next({ errorStatus: 500 });
    const err = await c.chat.completions.create({ model: 'f', messages }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(502);

    const feedback = await fetch(`${t.url}/v1/feedback`, {
      method: 'POST',
      headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ session_id: 'fb-1', score: 9, useful: true }),
    });
    expect(feedback.status).toBe(200);

    await t.app.get(DecisionTraceWriter).flush();
    const { rows } = await t.app
      .get(SqlStore)
      .query<TraceRow>('SELECT selected_provider, status, error_code, fallback_used, attempts, failed_attempts FROM decision_traces ORDER BY id', []);
    expect(rows).toEqual([
      { selected_provider: 'steady', status: 200, error_code: null, fallback_used: true, attempts: 2, failed_attempts: [{ provider: 'flaky', model: 'f', error: 'status', status: 503 }] },
      { selected_provider: 'steady', status: 200, error_code: null, fallback_used: true, attempts: 2, failed_attempts: [{ provider: 'flaky', model: 'f', error: 'status', status: 502 }] },
      { selected_provider: null, status: 502, error_code: 'upstream_error', fallback_used: false, attempts: 1, failed_attempts: [{ provider: 'flaky', model: 'f', error: 'status', status: 500 }] },
    ]);
    // No prompt text, no upstream key, no upstream body anywhere in the rows.
    const stored = JSON.stringify((await t.app.get(SqlStore).query('SELECT * FROM decision_traces', [])).rows);
    for (const secret of [SECRET_PROMPT, 'sk-flaky-secret', 'sk-steady-secret', KEY]) expect(stored).not.toContain(secret);

    const job = t.app.get(AggregationJob);
    expect(await job.run()).toEqual({ aggregation: 'done', snapshot: 'refreshed' });
    const snapshot = t.app.get(StatsSnapshot);
    // The flaky target failed all three of its calls: three requests, none ok, no feedback attributed.
    expect(snapshot.get('acme', 'flaky', 'f')).toMatchObject({ requests: 3, successRate: 0, n: 0, latencyP50Ms: null, costMeanUsd: null });
    // The steady one served both answers of the session and alone takes its feedback.
    expect(snapshot.get('acme', 'steady', 's')).toMatchObject({ requests: 2, successRate: 1, n: 1, npsPromoters: 1 });
    expect(snapshot.pool('flaky', 'f')).toMatchObject({ requests: 3, successRate: 0 });

    // Idempotent: another run recomputes the same figures.
    await job.run();
    expect(snapshot.get('acme', 'flaky', 'f')).toMatchObject({ requests: 3, successRate: 0 });
  });
});
