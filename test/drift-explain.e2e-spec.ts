import { AggregationJob } from '../src/learning/aggregation.job';
import { RegressionsSnapshotService } from '../src/routing/regressions/regressions-snapshot.service';
import { DecisionTraceWriter } from '../src/traces/decision-trace.writer';
import { startTestApp, TestApp } from './support/app';
import { readReply, type Reply } from './support/http-check';

/**
 * A change in a model's quality through the HTTP API (README "Drift: change detection"): chat
 * requests with a session id, feedback on each session, the learning beat, then explain. A model whose
 * feedback rises is detected after tens of sessions, its statistics restart at the change, routing
 * prefers it, and explain's evidence and text say so; a model whose feedback drops records a
 * regression, and explain shows both.
 */
const KEY = 'gw-drift-rw';
const yaml = `
providers:
  mock: { family: mock }
models:
  mock-fast: { provider: mock, type: chat }
  mock-slow: { provider: mock, type: chat }
routes:
  - { name: learn, models: [learn], strategy: feedback_driven, targets: [mock/mock-fast, mock/mock-slow] }
  - { name: solo, models: [solo], strategy: feedback_driven, targets: [mock/mock-fast] }
learning: { refresh_seconds: 3600 }
routing: { regressions: { check_seconds: 3600 } }
organizations:
  drifty:
    plan: pro
    features: [feedback_routing, explain]
    api_keys: [ { id: drifty-rw, key: "${KEY}", permissions: [read, write] } ]
`;

let t: TestApp;
let seq = 0;
beforeAll(async () => {
  t = await startTestApp({ yaml });
});
afterAll(async () => {
  await t?.close();
});

const headers = (extra: Record<string, string> = {}) => ({ authorization: `Bearer ${KEY}`, 'content-type': 'application/json', ...extra });

/** One session served by `model` (asked for by name), and its feedback. */
async function session(model: string, score: number, useful: boolean): Promise<void> {
  const id = `drift-${seq++}`;
  const chat = await fetch(`${t.url}/v1/chat/completions`, {
    method: 'POST',
    headers: headers({ 'gateway-session-id': id }),
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello' }] }),
  });
  expect([chat.status, chat.headers.get('gateway-model')]).toEqual([200, model]);
  await chat.arrayBuffer();
  const fb = await fetch(`${t.url}/v1/feedback`, { method: 'POST', headers: headers(), body: JSON.stringify({ session_id: id, score, useful }) });
  expect(fb.status).toBe(200);
}

/** The beat: traces written, the learning job run (it runs the detector), the regressions view reloaded. */
async function beat(): Promise<void> {
  await t.app.get(DecisionTraceWriter).flush();
  expect(await t.app.get(AggregationJob).run()).toEqual({ aggregation: 'done', snapshot: 'refreshed' });
  expect(await t.app.get(RegressionsSnapshotService).reload()).toBe(true);
}

async function explain(model: string, locale = 'en'): Promise<Reply> {
  const r = await fetch(`${t.url}/v1/routing/explain`, {
    method: 'POST',
    headers: headers({ 'accept-language': locale }),
    body: JSON.stringify({ request: { model, messages: [{ role: 'user', content: 'hello' }] } }),
  });
  return readReply(r);
}

it('explain shows a detected rise (the winner), then a detected drop with its regression, in en and pt', async () => {
  // Before: mock-fast answers well (8/10, useful), mock-slow poorly (3/10, not useful).
  for (let i = 0; i < 30; i++) {
    await session('mock-fast', 8, true);
    await session('mock-slow', 3, false);
  }
  await beat();
  let r = await explain('learn');
  expect(r.status).toBe(200);
  expect(r.json.would_select).toEqual({ provider: 'mock', model: 'mock-fast' });
  expect(r.json.evidence.last_change).toBeUndefined();

  // mock-slow gets better: 10/10, useful.
  for (let i = 0; i < 30; i++) await session('mock-slow', 10, true);
  await beat();
  r = await explain('learn');
  expect(r.json.would_select).toEqual({ provider: 'mock', model: 'mock-slow' });
  expect(r.json.evidence).toMatchObject({ recent_regressions: { kind: 'exact', exact: 0 }, last_change: { direction: 'rise' } });
  expect(r.json.evidence.last_change.since).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:00\.000Z$/);
  expect(r.json.explanation.text).toContain('A change was detected: the quality of mock/mock-slow rose around');
  const pt = await explain('learn', 'pt-BR');
  expect(pt.headers.get('content-language')).toBe('pt');
  expect(pt.json.explanation.text).toContain('Uma mudança foi detectada: a qualidade de mock/mock-slow subiu por volta de');

  // mock-fast gets worse: 1/10, not useful. A regression is recorded, and the penalty applies.
  const before = (await explain('solo')).json.candidates[0].score;
  for (let i = 0; i < 30; i++) await session('mock-fast', 1, false);
  await beat();
  r = await explain('solo');
  expect(r.json.would_select).toEqual({ provider: 'mock', model: 'mock-fast' });
  expect(r.json.evidence).toMatchObject({ recent_regressions: { kind: 'exact', exact: 1 }, last_change: { direction: 'drop' } });
  expect(r.json.evidence.last_regression_at).not.toBeNull();
  expect(r.json.explanation.text).toContain('A change was detected: the quality of mock/mock-fast dropped around');
  expect(r.json.candidates[0].score).toBeLessThan(before - 0.3);
  expect((await explain('solo', 'pt')).json.explanation.text).toContain('caiu por volta de');
});
