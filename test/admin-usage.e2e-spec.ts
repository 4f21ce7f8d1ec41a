/**
 * Admin API, usage (docs/api.md "Admin API"): the organisation's time series from its decision
 * traces (requests, errors by code, tokens, cost, latency percentiles, fallbacks, traffic share),
 * grouped by one dimension, paged; time ranges and point counts bounded. On PGlite and on real
 * Postgres + Redis.
 */
import { randomUUID } from 'node:crypto';
import { DecisionTraceWriter, type DecisionTrace } from '../src/traces/decision-trace.writer';
import { newTraceId } from '../src/traces/trace-id';
import { ADMIN_KEY, adminYaml, auth, describeEachStore, http, OTHER_ADMIN_KEY, RW_KEY } from './support/admin';
import { startTestApp, TestApp } from './support/app';

const HOUR = 3_600_000;
/** Five whole hours ago: every seeded trace is in the past and in known hour buckets. */
const BASE = Math.floor(Date.now() / HOUR) * HOUR - 5 * HOUR;
const iso = (ms: number) => new Date(ms).toISOString();

type Seed = Partial<DecisionTrace> & { at: number };

describeEachStore('Admin API: usage', (env) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ yaml: adminYaml(), env: env() });
    const seeds: Seed[] = [
      // Hour 0: two successes of mock-fast, one 502 of mock-smart.
      { at: BASE + 60_000, selectedProvider: 'mock', selectedModel: 'mock-fast', latencyMs: 100, costUsd: 0.001, promptTokens: 10, completionTokens: 20, reasoningTokens: 5, route: 'default' },
      { at: BASE + 120_000, selectedProvider: 'mock', selectedModel: 'mock-fast', latencyMs: 300, costUsd: 0.002, promptTokens: 30, completionTokens: 40, route: 'default', apiKeyId: 'acme-rw' },
      { at: BASE + 180_000, selectedProvider: 'mock', selectedModel: 'mock-smart', latencyMs: 50, status: 502, errorCode: 'upstream_error', costUsd: null, route: 'default' },
      // Hour 1: a fallback that served on mock-smart, and a 429 before any target was chosen.
      { at: BASE + HOUR + 60_000, selectedProvider: 'mock', selectedModel: 'mock-smart', latencyMs: 200, fallbackUsed: true, costUsd: 0.004, route: 'learned' },
      { at: BASE + HOUR + 120_000, selectedProvider: null, selectedModel: null, latencyMs: 1, status: 429, errorCode: 'rate_limited', costUsd: null, route: null },
      // Another organisation, same hour: never in acme's figures.
      { at: BASE + 90_000, orgId: 'other', apiKeyId: 'other-rw', selectedProvider: 'alt', selectedModel: 'shared', latencyMs: 9, costUsd: 1 },
    ];
    const writer = t.app.get(DecisionTraceWriter);
    for (const s of seeds) {
      const { at, ...fields } = s;
      writer.record({
        id: newTraceId(at),
        requestId: randomUUID(),
        orgId: 'acme',
        apiKeyId: 'acme-admin',
        sessionId: null,
        endpoint: 'chat',
        requestedModel: 'auto',
        route: 'default',
        strategy: 'ordered',
        candidates: null,
        selectedProvider: null,
        selectedModel: null,
        fallbackUsed: false,
        attempts: 1,
        failedAttempts: null,
        experimentId: null,
        experimentArm: null,
        status: 200,
        errorCode: null,
        latencyMs: 1,
        ttftMs: null,
        promptTokens: null,
        completionTokens: null,
        reasoningTokens: null,
        costUsd: null,
        finishReason: 'stop',
        ...fields,
        createdAt: new Date(at),
      });
    }
    await writer.flush();
  });
  afterAll(async () => {
    await t?.close();
  });

  const usage = (query: Record<string, string | number>, key = ADMIN_KEY) => http(t).get('/v1/admin/usage').query(query).set(auth(key));
  const range = { from: iso(BASE - HOUR), to: iso(BASE + 3 * HOUR) };

  it('hourly points: requests, errors by code, tokens, cost, latency over successes, fallbacks, traffic share', async () => {
    const r = await usage({ ...range, step: 'hour' });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ from: range.from, to: range.to, step: 'hour', group_by: null, source: 'decision_traces', next_cursor: null });
    expect(r.body.data).toHaveLength(2);
    const [h0, h1] = r.body.data;
    expect(h0).toEqual({
      t: iso(BASE),
      group: null,
      requests: 3,
      errors: 1,
      errors_by_code: [{ code: 'upstream_error', count: 1 }],
      tokens: { prompt: 40, completion: 60, reasoning: 5 },
      cost_usd: expect.closeTo(0.003, 12),
      latency_ms: { p50: 200, p90: expect.closeTo(280, 9), p99: expect.closeTo(298, 9) },
      fallbacks: 0,
      traffic_share: [
        { provider: 'mock', model: 'mock-fast', requests: 2, share: 2 / 3 },
        { provider: 'mock', model: 'mock-smart', requests: 1, share: 1 / 3 },
      ],
    });
    expect(h1).toMatchObject({
      t: iso(BASE + HOUR),
      requests: 2,
      errors: 1,
      errors_by_code: [{ code: 'rate_limited', count: 1 }],
      fallbacks: 1,
      latency_ms: { p50: 200, p90: 200, p99: 200 },
      traffic_share: [
        { provider: 'mock', model: 'mock-smart', requests: 1, share: 0.5 },
        { provider: null, model: null, requests: 1, share: 0.5 },
      ],
    });
    // The other organisation sees only its own trace.
    const other = await usage({ ...range, step: 'hour' }, OTHER_ADMIN_KEY);
    expect(other.body.data).toEqual([expect.objectContaining({ t: iso(BASE), requests: 1, cost_usd: 1 })]);
  });

  it('group_by model, provider, key, route and status; minute and day steps', async () => {
    const byModel = (await usage({ ...range, step: 'hour', group_by: 'model' })).body.data.map((p: any) => [p.t, p.group, p.requests]);
    expect(byModel).toEqual([
      [iso(BASE), { model: 'mock-fast' }, 2],
      [iso(BASE), { model: 'mock-smart' }, 1],
      [iso(BASE + HOUR), { model: null }, 1],
      [iso(BASE + HOUR), { model: 'mock-smart' }, 1],
    ]);
    const byStatus = (await usage({ ...range, step: 'hour', group_by: 'status' })).body.data.map((p: any) => [p.group, p.requests]);
    expect(byStatus).toEqual([
      [{ status: 200 }, 2],
      [{ status: 502 }, 1],
      [{ status: 200 }, 1],
      [{ status: 429 }, 1],
    ]);
    // Summed over the day points (the range may span two UTC days).
    const perKey: Record<string, number> = {};
    for (const p of (await usage({ ...range, step: 'day', group_by: 'key' })).body.data) perKey[p.group.key] = (perKey[p.group.key] ?? 0) + p.requests;
    expect(perKey).toEqual({ 'acme-admin': 4, 'acme-rw': 1 });
    const byRoute = (await usage({ ...range, step: 'hour', group_by: 'route' })).body.data.map((p: any) => p.group.route);
    expect(byRoute).toEqual(['default', null, 'learned']);
    const byProvider = (await usage({ ...range, group_by: 'provider' })).body.data.map((p: any) => p.group.provider);
    expect(byProvider).toEqual(['mock', null, 'mock']);
    const minutes = (await usage({ from: iso(BASE), to: iso(BASE + HOUR), step: 'minute' })).body.data.map((p: any) => [p.t, p.requests]);
    expect(minutes).toEqual([
      [iso(BASE + 60_000), 1],
      [iso(BASE + 120_000), 1],
      [iso(BASE + 180_000), 1],
    ]);
  });

  it('points are paged in time order with an opaque cursor tied to the query', async () => {
    const seen: Array<[string, unknown]> = [];
    let cursor: string | null = null;
    do {
      const r: any = await usage(cursor ? { ...range, group_by: 'model', limit: 1, cursor } : { ...range, group_by: 'model', limit: 1 });
      expect(r.status).toBe(200);
      expect(r.body.data.length).toBeLessThanOrEqual(1);
      seen.push(...r.body.data.map((p: any) => [p.t, p.group] as [string, unknown]));
      cursor = r.body.next_cursor;
    } while (cursor);
    expect(seen).toEqual((await usage({ ...range, group_by: 'model' })).body.data.map((p: any) => [p.t, p.group]));
    const first = await usage({ ...range, group_by: 'model', limit: 1 });
    const moved = await usage({ ...range, group_by: 'status', limit: 1, cursor: first.body.next_cursor });
    expect([moved.status, moved.body.error.param]).toEqual([400, 'cursor']);
  });

  it('ranges: at most 366 days, from before to, at most 10,000 points; times need a zone; bad values name their parameter', async () => {
    const year = { from: '2025-01-01T00:00:00Z', to: '2026-01-02T00:00:00Z' };
    expect((await usage({ ...year, step: 'day' })).status).toBe(200);
    const cases: Array<[Record<string, string>, string]> = [
      [{ from: '2025-01-01T00:00:00Z', to: '2026-01-03T00:00:00Z', step: 'day' }, 'from'],
      [{ from: range.to, to: range.from }, 'from'],
      [{ from: range.from, to: range.from }, 'from'],
      // 10,001 minutes.
      [{ from: iso(BASE), to: iso(BASE + 10_001 * 60_000), step: 'minute' }, 'step'],
      [{ from: iso(BASE), to: iso(BASE + 2 * HOUR), step: 'second' }, 'step'],
      [{ group_by: 'org' }, 'group_by'],
      [{ from: '2025-01-01T00:00:00' }, 'from'],
      [{ from: '2025-02-30T00:00:00Z' }, 'from'],
      [{ to: 'yesterday' }, 'to'],
      [{ from: '1735689600000' }, 'from'],
      [{ org_id: 'other' }, 'org_id'],
    ];
    for (const [q, param] of cases) {
      const r = await usage(q);
      expect([q, r.status, r.body.error?.code, r.body.error?.param]).toEqual([q, 400, 'invalid_request', param]);
    }
    // Exactly 10,000 minutes is allowed; a bare date is UTC midnight; offsets are honoured.
    expect((await usage({ from: iso(BASE - 10_000 * 60_000), to: iso(BASE), step: 'minute' })).status).toBe(200);
    const dated = await usage({ from: '2025-03-01', to: '2025-03-02T02:00:00+02:00', step: 'day' });
    expect(dated.body).toMatchObject({ from: '2025-03-01T00:00:00.000Z', to: '2025-03-02T00:00:00.000Z', data: [] });
  });

  it('401, then 403 admin_permission, before any 400', async () => {
    expect((await http(t).get('/v1/admin/usage?step=bad')).status).toBe(401);
    const rw = await usage({ step: 'bad' }, RW_KEY);
    expect([rw.status, rw.body.error.code]).toEqual([403, 'admin_permission']);
  });
});
