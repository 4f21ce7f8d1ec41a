/**
 * Experiments API through HTTP (docs/api.md "GET /v1/experiments", "POST /v1/experiments",
 * "POST /v1/experiments/{id}/rollback", "Errors", "Check order"): every error row, the check order,
 * the state table, concurrent creates, byte-identical 404s and the lifecycle events each call writes.
 * The main suite runs on PGlite; a smaller one, the concurrency and the Postgres-down cases run on a
 * real Postgres.
 */
import { Client } from 'pg';
import { CacheStore } from '../src/stores/cache/cache-store';
import { SqlStore, type SqlExecutor } from '../src/stores/sql/sql-store';
import { ExperimentsService } from '../src/experiments/experiments.service';
import { FREE_KEY, KILLED_KEY, NO_FEATURES_KEY, PRO_KEY, READ_ONLY_KEY, startTestApp, TestApp, WRITE_ONLY_KEY } from './support/app';
import { readReply, type Reply } from './support/http-check';
import { createTestDatabase, TestDatabase } from './support/postgres';
import { describeWithPostgres, TEST_DATABASE_URL } from './support/real-servers';

const OTHER_KEY = 'gw-test-other-org-rw';
const THIRD_KEY = 'gw-test-third-org-rw';
const EMPTY_KEY = 'gw-test-empty-org-rw';
const MODEL_COUNT = 16;
const CATALOGUE = Array.from({ length: MODEL_COUNT }, (_, i) => `m${String(i + 1).padStart(2, '0')}`);

/** A catalogue with many chat models (so every test gets fresh pairs), a model on two providers, and an embedding model. */
function yaml(createsPerHour?: number): string {
  return `
providers:
  mock: { family: mock }
  alt: { family: mock }
models:
${CATALOGUE.map((m) => `  ${m}: { provider: mock, type: chat }`).join('\n')}
  shared: { type: chat, providers: { mock: {}, alt: {} } }
  alt-only: { provider: alt, type: chat }
  embed-small: { provider: mock, type: embedding }
routes:
  - { name: default, models: [auto], targets: [mock/m01] }
${createsPerHour === undefined ? '' : `limits: { experiment_creates_per_hour: ${createsPerHour} }`}
organizations:
  acme:
    plan: pro
    features: [has_test_ab, feedback_routing, explain]
    api_keys:
      - { id: acme-rw, key: "${PRO_KEY}", permissions: [read, write] }
      - { id: acme-ro, key: "${READ_ONLY_KEY}", permissions: [read] }
      - { id: acme-wo, key: "${WRITE_ONLY_KEY}", permissions: [write] }
  other:
    plan: pro
    features: [has_test_ab]
    api_keys: [ { id: other-rw, key: "${OTHER_KEY}" } ]
  third:
    plan: pro
    features: [has_test_ab]
    api_keys: [ { id: third-rw, key: "${THIRD_KEY}" } ]
  empty:
    plan: pro
    features: [has_test_ab]
    api_keys: [ { id: empty-rw, key: "${EMPTY_KEY}" } ]
  freeco:
    plan: free
    features: [has_test_ab, feedback_routing, explain]
    api_keys: [ { id: free-rw, key: "${FREE_KEY}" } ]
  bareco:
    plan: pro
    features: [feedback_routing, explain]
    api_keys: [ { id: bare-rw, key: "${NO_FEATURES_KEY}" } ]
  killco:
    plan: pro
    features: [has_test_ab, feedback_routing, explain]
    kill_switches: [experiments]
    api_keys: [ { id: killed-rw, key: "${KILLED_KEY}" } ]
`;
}

interface Call {
  key?: string | null;
  confirm?: string | null;
  headers?: Record<string, string>;
  body?: string;
}

async function call(base: string, method: string, path: string, c: Call = {}): Promise<Reply> {
  const headers: Record<string, string> = { ...(c.headers ?? {}) };
  if (c.key !== null) headers.authorization = `Bearer ${c.key ?? PRO_KEY}`;
  if (c.confirm !== null && method === 'POST') headers['x-gateway-confirm'] = c.confirm ?? 'experiments';
  if (c.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(base + path, { method, headers, body: c.body });
  return readReply(res);
}

const code = (r: Reply) => r.json?.error?.code;
const outcome = (r: Reply) => [r.status, code(r)];

interface Target {
  provider: string;
  model: string;
}
interface Pair {
  baseline: Target;
  candidate: Target;
}

/** Ordered pairs of distinct catalogue models, handed out once each per process. */
let pairCursor = 0;
function freshPair(): Pair {
  const n = MODEL_COUNT * (MODEL_COUNT - 1);
  if (pairCursor >= n) throw new Error('test catalogue has no fresh pairs left');
  const i = Math.floor(pairCursor / (MODEL_COUNT - 1));
  let j = pairCursor % (MODEL_COUNT - 1);
  if (j >= i) j++;
  pairCursor++;
  return { baseline: { provider: 'mock', model: CATALOGUE[i] }, candidate: { provider: 'mock', model: CATALOGUE[j] } };
}

function createBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { type: 'canary', ...freshPair(), traffic_pct: 10, ...overrides };
}

/** A JSON object of exactly `size` bytes: `obj` padded with spaces before its closing brace. */
function jsonOfSize(size: number, obj: Record<string, unknown>): string {
  const core = JSON.stringify(obj);
  if (core.length > size) throw new Error('object larger than the size asked for');
  return core.slice(0, -1) + ' '.repeat(size - core.length) + '}';
}

const CONTRACT_FIELDS = ['baseline', 'candidate', 'ended_at', 'id', 'started_at', 'status', 'summary', 'traffic_pct', 'type'];
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

interface EventRow {
  kind: string;
  actor_api_key_id: string | null;
  detail: any;
  org_id: string;
}
async function eventsOf(sql: SqlExecutor, experimentId: string): Promise<EventRow[]> {
  const { rows } = await sql.query<EventRow>('SELECT kind, actor_api_key_id, detail, org_id FROM experiment_events WHERE experiment_id = $1 ORDER BY id', [experimentId]);
  return rows;
}
async function count(sql: SqlExecutor, text: string, params: unknown[]): Promise<number> {
  const { rows } = await sql.query<{ n: number }>(text, params);
  return Number(rows[0].n);
}

/** The suite that runs on every store; `ctx()` gives the app started by the enclosing describe. */
function contractSuite(ctx: () => TestApp) {
  const get = (path: string, c?: Call) => call(ctx().url, 'GET', path, c);
  const post = (path: string, c?: Call) => call(ctx().url, 'POST', path, c);
  const create = (body: Record<string, unknown> = createBody(), c: Call = {}) => post('/v1/experiments', { body: JSON.stringify(body), ...c });
  const rollback = (id: string, c: Call = {}) => post(`/v1/experiments/${id}/rollback`, c);
  const sql = () => ctx().app.get(SqlStore);
  const service = () => ctx().app.get(ExperimentsService);

  describe('create', () => {
    it('201: the contract record, status active, started_at now, no stop_rule; events created then started with the actor', async () => {
      const body = createBody({ type: 'shadow', traffic_pct: 12.5, stop_rule: { min_n: 250, max_regression: 0.1 } });
      const before = Date.now();
      const r = await create(body);
      expect(r.status).toBe(201);
      expect(Object.keys(r.json).sort()).toEqual(CONTRACT_FIELDS);
      expect(r.json).toEqual({
        id: expect.stringMatching(UUID),
        type: 'shadow',
        status: 'active',
        traffic_pct: 12.5,
        baseline: body.baseline,
        candidate: body.candidate,
        started_at: expect.stringMatching(ISO_UTC),
        ended_at: null,
        summary: null,
      });
      const started = Date.parse(r.json.started_at);
      expect(started).toBeGreaterThanOrEqual(before - 2_000);
      expect(started).toBeLessThanOrEqual(Date.now() + 2_000);

      const events = await eventsOf(sql(), r.json.id);
      expect(events.map((e) => [e.kind, e.actor_api_key_id, e.org_id])).toEqual([
        ['created', 'acme-rw', 'acme'],
        ['started', 'acme-rw', 'acme'],
      ]);
      expect(events[0].detail).toEqual({ type: 'shadow', traffic_pct: 12.5, baseline: body.baseline, candidate: body.candidate, stop_rule: { min_n: 250, max_regression: 0.1 } });
      const { rows } = await sql().query<{ min_n: number; max_regression: number }>('SELECT min_n, max_regression FROM experiments WHERE id = $1', [r.json.id]);
      expect(rows).toEqual([{ min_n: 250, max_regression: 0.1 }]);
    });

    it('stop_rule defaults: min_n 100, max_regression 0.05 (omitted, empty or null)', async () => {
      for (const stop_rule of [undefined, {}, null, { min_n: null, max_regression: null }]) {
        const r = await create(createBody(stop_rule === undefined ? {} : { stop_rule }));
        expect(r.status).toBe(201);
        const { rows } = await sql().query<{ min_n: number; max_regression: number }>('SELECT min_n, max_regression FROM experiments WHERE id = $1', [r.json.id]);
        expect(rows).toEqual([{ min_n: 100, max_regression: 0.05 }]);
      }
    });

    it('accepts the edges: traffic_pct 0 and 100, max_regression 0 and 0.5, min_n 1 and 1,000,000, a model on two providers', async () => {
      for (const extra of [
        { traffic_pct: 0 },
        { traffic_pct: 100 },
        { stop_rule: { max_regression: 0 } },
        { stop_rule: { max_regression: 0.5 } },
        { stop_rule: { min_n: 1 } },
        { stop_rule: { min_n: 1_000_000 } },
      ]) {
        const r = await create(createBody(extra));
        expect([JSON.stringify(extra), r.status]).toEqual([JSON.stringify(extra), 201]);
      }
      const alt = await create({ type: 'canary', baseline: { provider: 'mock', model: 'shared' }, candidate: { provider: 'alt', model: 'shared' }, traffic_pct: 5 });
      expect(alt.status).toBe(201);
      expect(alt.json.traffic_pct).toBe(5);
      const altOnly = await create({ type: 'canary', baseline: { provider: 'alt', model: 'alt-only' }, candidate: { provider: 'alt', model: 'shared' }, traffic_pct: 5 });
      expect(altOnly.status).toBe(201);
    });

    it('400 invalid_body for a body that is not JSON or not an object', async () => {
      for (const body of ['{"type":', 'not json', '', '[]', 'null', '42', '"canary"']) {
        const r = await post('/v1/experiments', { body });
        expect([body, ...outcome(r)]).toEqual([body, 400, 'invalid_body']);
      }
    });

    it('400 invalid_body naming the field: unknown keys, schema, stop_rule ranges', async () => {
      const cases: Array<[Record<string, unknown>, string]> = [
        [createBody({ colour: 'blue' }), 'colour'],
        [createBody({ baseline: { provider: 'mock', model: 'm01', region: 'eu' } }), 'baseline.region'],
        [createBody({ stop_rule: { min_n: 10, window: 5 } }), 'stop_rule.window'],
        [{ ...createBody(), type: undefined }, 'type'],
        [createBody({ type: 'blue' }), 'type'],
        [createBody({ type: 'CANARY' }), 'type'],
        [{ ...createBody(), baseline: undefined }, 'baseline'],
        [createBody({ baseline: 'mock/m01' }), 'baseline'],
        [createBody({ baseline: [{ provider: 'mock', model: 'm01' }] }), 'baseline'],
        [createBody({ candidate: { provider: 'mock' } }), 'candidate.model'],
        [createBody({ candidate: { provider: 7, model: 'm01' } }), 'candidate.provider'],
        [createBody({ candidate: { provider: '', model: 'm01' } }), 'candidate.provider'],
        [{ ...createBody(), traffic_pct: undefined }, 'traffic_pct'],
        [createBody({ traffic_pct: '50' }), 'traffic_pct'],
        [createBody({ traffic_pct: null }), 'traffic_pct'],
        [createBody({ traffic_pct: true }), 'traffic_pct'],
        [createBody({ stop_rule: 'strict' }), 'stop_rule'],
        [createBody({ stop_rule: { max_regression: -0.01 } }), 'stop_rule.max_regression'],
        [createBody({ stop_rule: { max_regression: 0.51 } }), 'stop_rule.max_regression'],
        [createBody({ stop_rule: { max_regression: '0.1' } }), 'stop_rule.max_regression'],
        [createBody({ stop_rule: { min_n: 0 } }), 'stop_rule.min_n'],
        [createBody({ stop_rule: { min_n: 1_000_001 } }), 'stop_rule.min_n'],
        [createBody({ stop_rule: { min_n: 1.5 } }), 'stop_rule.min_n'],
      ];
      for (const [body, param] of cases) {
        const r = await create(body);
        expect([param, r.status, code(r), r.json.error.param]).toEqual([param, 400, 'invalid_body', param]);
      }
      for (const body of ['{"__proto__":{"admin":true},"type":"canary"}', '{"type":"canary","baseline":{"constructor":{}}}']) {
        expect(outcome(await post('/v1/experiments', { body }))).toEqual([400, 'invalid_body']);
      }
    });

    it('400 invalid_body for unknown provider or model ids, a model its provider does not serve, and an embedding model', async () => {
      const { baseline, candidate } = freshPair();
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ baseline: { provider: 'opnai', model: baseline.model }, candidate }, 'baseline.provider'],
        [{ baseline: { provider: 'constructor', model: baseline.model }, candidate }, 'baseline.provider'],
        [{ baseline, candidate: { provider: 'mock', model: 'gpt-5' } }, 'candidate.model'],
        [{ baseline, candidate: { provider: 'mock', model: 'toString' } }, 'candidate.model'],
        [{ baseline, candidate: { provider: 'alt', model: 'm01' } }, 'candidate.model'],
        [{ baseline: { provider: 'mock', model: 'alt-only' }, candidate }, 'baseline.model'],
        [{ baseline, candidate: { provider: 'mock', model: 'embed-small' } }, 'candidate.model'],
      ];
      for (const [pair, param] of cases) {
        const r = await create({ type: 'canary', traffic_pct: 10, ...pair });
        expect([param, r.status, code(r), r.json.error.param]).toEqual([param, 400, 'invalid_body', param]);
      }
    });

    it('400 invalid_body when the candidate pair equals the baseline pair', async () => {
      const { baseline } = freshPair();
      const r = await create({ type: 'canary', baseline, candidate: { ...baseline }, traffic_pct: 10 });
      expect([r.status, code(r), r.json.error.param]).toEqual([400, 'invalid_body', 'candidate']);
      // Same model, other provider: a different pair.
      const other = await create({ type: 'canary', baseline: { provider: 'alt', model: 'shared' }, candidate: { provider: 'mock', model: 'shared' }, traffic_pct: 10 });
      expect(other.status).toBe(201);
    });

    it('400 invalid_traffic_pct outside [0, 100]', async () => {
      for (const raw of ['-1', '100.5', '-0.0001', '100.0001', '1e400', '-1e400']) {
        const body = JSON.stringify(createBody({ traffic_pct: 0 })).replace('"traffic_pct":0', `"traffic_pct":${raw}`);
        const r = await post('/v1/experiments', { body });
        expect([raw, r.status, code(r), r.json.error.param]).toEqual([raw, 400, 'invalid_traffic_pct', 'traffic_pct']);
      }
    });

    it('401, 403 write_permission, 403 plan_required (free plan, no has_test_ab, kill switch), 400 missing_confirmation', async () => {
      expect(outcome(await create(createBody(), { key: null }))).toEqual([401, 'invalid_api_key']);
      expect(outcome(await create(createBody(), { key: 'gw-not-a-key' }))).toEqual([401, 'invalid_api_key']);
      expect(outcome(await create(createBody(), { key: READ_ONLY_KEY }))).toEqual([403, 'write_permission']);
      const free = await create(createBody(), { key: FREE_KEY });
      expect(outcome(free)).toEqual([403, 'plan_required']);
      expect(free.json.error.message).toContain('Pro plan');
      const bare = await create(createBody(), { key: NO_FEATURES_KEY });
      expect(outcome(bare)).toEqual([403, 'plan_required']);
      expect(bare.json.error.message).toContain('has_test_ab');
      const killed = await create(createBody(), { key: KILLED_KEY });
      expect(outcome(killed)).toEqual([403, 'plan_required']);
      expect(killed.json.error.message).toContain('kill switch experiments');
      for (const confirm of [null, '', 'Experiments', 'experiment', 'experiments,experiments', 'yes']) {
        expect([confirm, ...outcome(await create(createBody(), { confirm }))]).toEqual([confirm, 400, 'missing_confirmation']);
      }
      // The write-only key may create but not list.
      expect((await create(createBody(), { key: WRITE_ONLY_KEY })).status).toBe(201);
    });

    it('body cap: exactly 8 KiB passes, 8 KiB + 1 is 400 body_too_large', async () => {
      const ok = await post('/v1/experiments', { body: jsonOfSize(8 * 1024, createBody()) });
      expect(ok.status).toBe(201);
      const over = await post('/v1/experiments', { body: jsonOfSize(8 * 1024 + 1, createBody()) });
      expect(outcome(over)).toEqual([400, 'body_too_large']);
    });

    it('check order: 401 → 403 → missing_confirmation → body_too_large → invalid_body → invalid_traffic_pct → 409', async () => {
      const huge = 'x'.repeat(9_000);
      expect(code(await post('/v1/experiments', { key: 'gw-nope', confirm: null, body: huge }))).toBe('invalid_api_key');
      expect(code(await post('/v1/experiments', { key: READ_ONLY_KEY, confirm: null, body: huge }))).toBe('write_permission');
      expect(code(await post('/v1/experiments', { key: FREE_KEY, confirm: null, body: huge }))).toBe('plan_required');
      expect(code(await post('/v1/experiments', { key: KILLED_KEY, confirm: null, body: huge }))).toBe('plan_required');
      expect(code(await post('/v1/experiments', { confirm: 'nope', body: huge }))).toBe('missing_confirmation');
      expect(code(await post('/v1/experiments', { body: huge }))).toBe('body_too_large');
      expect(code(await post('/v1/experiments', { body: '{"traffic_pct":500' }))).toBe('invalid_body');
      // Every invalid_body rule comes before the traffic_pct range.
      expect(code(await create(createBody({ traffic_pct: 500, colour: 1 })))).toBe('invalid_body');
      expect(code(await create(createBody({ traffic_pct: 500, type: 'blue' })))).toBe('invalid_body');
      expect(code(await create(createBody({ traffic_pct: 500, stop_rule: { min_n: 0 } })))).toBe('invalid_body');
      expect(code(await create({ ...createBody({ traffic_pct: 500 }), baseline: { provider: 'mock', model: 'nope' } }))).toBe('invalid_body');
      const same = freshPair();
      expect(code(await create({ type: 'canary', baseline: same.baseline, candidate: same.baseline, traffic_pct: 500 }))).toBe('invalid_body');
      // invalid_traffic_pct before 409: the pair below is already active.
      const taken = createBody();
      expect((await create(taken)).status).toBe(201);
      expect(code(await create({ ...taken, traffic_pct: 101 }))).toBe('invalid_traffic_pct');
      expect(code(await create(taken))).toBe('active_already_exists');
    });

    it('409 active_already_exists for the same (baseline, candidate) pair of the organisation, whatever the type', async () => {
      const pair = freshPair();
      const first = await create({ type: 'canary', ...pair, traffic_pct: 10 });
      expect(first.status).toBe(201);
      const again = await create({ type: 'shadow', ...pair, traffic_pct: 50 });
      expect(outcome(again)).toEqual([409, 'active_already_exists']);
      expect(again.json.error.message).toBe('An active experiment already exists for this baseline and candidate.');
      // Nothing was written for the refused one.
      expect(await count(sql(), 'SELECT count(*)::int AS n FROM experiments WHERE org_id = $1 AND baseline_model = $2 AND candidate_model = $3', ['acme', pair.baseline.model, pair.candidate.model])).toBe(1);
      // The reversed pair is another pair; another organisation has its own.
      expect((await create({ type: 'canary', baseline: pair.candidate, candidate: pair.baseline, traffic_pct: 10 })).status).toBe(201);
      expect((await create({ type: 'canary', ...pair, traffic_pct: 10 }, { key: OTHER_KEY })).status).toBe(201);
      // After a rollback the pair is free again.
      expect((await rollback(first.json.id)).status).toBe(200);
      expect((await create({ type: 'shadow', ...pair, traffic_pct: 10 })).status).toBe(201);
    });

    it('concurrent creates for one pair: exactly one 201, the rest 409, one row and two events', async () => {
      const pair = freshPair();
      const replies = await Promise.all(Array.from({ length: 20 }, () => create({ type: 'canary', ...pair, traffic_pct: 10 })));
      const statuses = replies.map((r) => r.status).sort();
      expect(statuses).toEqual([201, ...Array(19).fill(409)]);
      for (const r of replies.filter((x) => x.status === 409)) expect(code(r)).toBe('active_already_exists');
      const { rows } = await sql().query<{ id: string }>('SELECT id FROM experiments WHERE org_id = $1 AND baseline_model = $2 AND candidate_model = $3', ['acme', pair.baseline.model, pair.candidate.model]);
      expect(rows.map((r) => r.id)).toEqual([replies.find((r) => r.status === 201)!.json.id]);
      expect((await eventsOf(sql(), rows[0].id)).map((e) => e.kind)).toEqual(['created', 'started']);
    });
  });

  describe('list', () => {
    it('the organisation\'s experiments only, newest first, contract fields, ISO 8601 UTC times', async () => {
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const r = await create(createBody(), { key: THIRD_KEY });
        expect(r.status).toBe(201);
        ids.push(r.json.id);
        await sleep(5);
      }
      expect((await rollback(ids[1], { key: THIRD_KEY })).status).toBe(200);
      const r = await get('/v1/experiments', { key: THIRD_KEY });
      expect(r.status).toBe(200);
      expect(r.json.map((e: any) => e.id)).toEqual([...ids].reverse());
      for (const e of r.json) {
        expect(Object.keys(e).sort()).toEqual(CONTRACT_FIELDS);
        expect(e.started_at).toMatch(ISO_UTC);
      }
      expect(r.json[1].status).toBe('rolled_back');
      expect(r.json[1].ended_at).toMatch(ISO_UTC);
      expect(r.json[0].ended_at).toBeNull();
      // acme's list holds none of them.
      const acme = await get('/v1/experiments');
      expect(acme.status).toBe(200);
      expect(acme.json.length).toBeGreaterThan(0);
      expect(acme.json.some((e: any) => ids.includes(e.id))).toBe(false);
    });

    it('an organisation with none gets []', async () => {
      const fresh = await get('/v1/experiments', { key: EMPTY_KEY });
      expect([fresh.status, fresh.text]).toEqual([200, '[]']);
    });

    it('401, 403 read_permission, 403 plan_required; no confirmation needed for reading', async () => {
      expect(outcome(await get('/v1/experiments', { key: null }))).toEqual([401, 'invalid_api_key']);
      expect(outcome(await get('/v1/experiments', { key: WRITE_ONLY_KEY }))).toEqual([403, 'read_permission']);
      expect(outcome(await get('/v1/experiments', { key: FREE_KEY }))).toEqual([403, 'plan_required']);
      expect(outcome(await get('/v1/experiments', { key: NO_FEATURES_KEY }))).toEqual([403, 'plan_required']);
      expect(outcome(await get('/v1/experiments', { key: KILLED_KEY }))).toEqual([403, 'plan_required']);
      expect((await get('/v1/experiments', { key: READ_ONLY_KEY })).status).toBe(200);
    });
  });

  describe('rollback', () => {
    it('active → rolled_back: 200, ended_at set, one rolled_back event with the actor', async () => {
      const created = (await create()).json;
      const before = Date.now();
      const r = await rollback(created.id);
      expect(r.status).toBe(200);
      expect(r.json).toEqual({ ...created, status: 'rolled_back', ended_at: expect.stringMatching(ISO_UTC) });
      expect(Date.parse(r.json.ended_at)).toBeGreaterThanOrEqual(before - 2_000);
      const events = await eventsOf(sql(), created.id);
      expect(events.map((e) => [e.kind, e.actor_api_key_id])).toEqual([
        ['created', 'acme-rw'],
        ['started', 'acme-rw'],
        ['rolled_back', 'acme-rw'],
      ]);
      expect(events[2].detail).toEqual({ from: 'active' });
      expect(await service().activeFor('acme')).not.toContainEqual(expect.objectContaining({ id: created.id }));
    });

    it('rolled_back → rolled_back: 200 with the existing row, and every call writes its event row', async () => {
      const created = (await create()).json;
      const first = await rollback(created.id);
      expect(first.status).toBe(200);
      for (let i = 0; i < 3; i++) {
        const again = await rollback(created.id, { key: WRITE_ONLY_KEY });
        expect(again.status).toBe(200);
        expect(again.text).toBe(first.text);
      }
      // Concurrent repeats are neither throttled nor merged.
      const burst = await Promise.all(Array.from({ length: 5 }, () => rollback(created.id)));
      expect(burst.map((r) => r.status)).toEqual(Array(5).fill(200));
      const events = await eventsOf(sql(), created.id);
      const rollbacks = events.filter((e) => e.kind === 'rolled_back');
      expect(rollbacks).toHaveLength(1 + 3 + 5);
      expect(rollbacks.slice(1, 4).map((e) => [e.actor_api_key_id, e.detail])).toEqual(Array(3).fill(['acme-wo', { from: 'rolled_back' }]));
    });

    it('completed → 409 completed_cannot_rollback; the row and its events stay as they were', async () => {
      const created = (await create()).json;
      const summary = { baseline: { samples: 120, quality: 0.8 }, candidate: { samples: 130, quality: 0.82 } };
      const done = await service().complete(created.id, summary);
      expect(done).toMatchObject({ id: created.id, status: 'completed', summary });
      const eventsBefore = await eventsOf(sql(), created.id);
      expect(eventsBefore.map((e) => [e.kind, e.actor_api_key_id])).toEqual([
        ['created', 'acme-rw'],
        ['started', 'acme-rw'],
        ['completed', null],
      ]);
      expect(eventsBefore[2].detail).toEqual({ actor: 'system', from: 'active' });
      const r = await rollback(created.id);
      expect(outcome(r)).toEqual([409, 'completed_cannot_rollback']);
      const listed = (await get('/v1/experiments')).json.find((e: any) => e.id === created.id);
      expect(listed).toEqual({ ...created, status: 'completed', ended_at: expect.stringMatching(ISO_UTC), summary });
      expect(await eventsOf(sql(), created.id)).toEqual(eventsBefore);
      // The system does not end it twice.
      expect(await service().complete(created.id, {})).toBeNull();
      expect(await service().rollbackBySystem(created.id, 'late')).toBeNull();
    });

    it('draft → rolled_back (started_at stays null)', async () => {
      const pair = freshPair();
      const { rows } = await sql().query<{ id: string }>(
        `INSERT INTO experiments (org_id, type, status, traffic_pct, baseline_provider, baseline_model, candidate_provider, candidate_model, min_n, max_regression)
         VALUES ('acme', 'canary', 'draft', 5, $1, $2, $3, $4, 100, 0.05) RETURNING id`,
        [pair.baseline.provider, pair.baseline.model, pair.candidate.provider, pair.candidate.model],
      );
      const r = await rollback(rows[0].id);
      expect(r.status).toBe(200);
      expect(r.json).toMatchObject({ id: rows[0].id, status: 'rolled_back', started_at: null, ended_at: expect.stringMatching(ISO_UTC) });
      expect((await eventsOf(sql(), rows[0].id)).map((e) => [e.kind, e.detail])).toEqual([['rolled_back', { from: 'draft' }]]);
    });

    it('404 not_found, byte-identical for a missing, a malformed and another organisation\'s id; nothing written', async () => {
      const foreign = (await create(createBody(), { key: OTHER_KEY })).json;
      const eventsBefore = await count(sql(), 'SELECT count(*)::int AS n FROM experiment_events', []);
      const ids = [
        '00000000-0000-4000-8000-000000000000',
        foreign.id,
        foreign.id.toUpperCase(),
        'not-a-uuid',
        '12345',
        encodeURIComponent("1' OR '1'='1"),
        `${foreign.id}x`,
        `{${foreign.id}}`,
        foreign.id.replace(/-/g, ''),
        'x'.repeat(600),
      ];
      const replies = await Promise.all(ids.map((id) => rollback(id)));
      for (const [i, r] of replies.entries()) {
        expect([ids[i], r.status]).toEqual([ids[i], 404]);
        expect(r.text).toBe(replies[0].text);
      }
      expect(replies[0].json).toEqual({ error: { type: 'error', code: 'not_found', message: 'No experiment with this id in the organisation.' } });
      expect(await count(sql(), 'SELECT count(*)::int AS n FROM experiment_events', [])).toBe(eventsBefore);
      // The other organisation's experiment is untouched, and its owner can roll it back.
      expect((await rollback(foreign.id, { key: OTHER_KEY })).json.status).toBe('rolled_back');
    });

    it('401, 403 write_permission / plan_required, 400 missing_confirmation, all before the lookup', async () => {
      const created = (await create()).json;
      const missing = '00000000-0000-4000-8000-000000000001';
      for (const id of [created.id, missing]) {
        expect(outcome(await rollback(id, { key: null }))).toEqual([401, 'invalid_api_key']);
        expect(outcome(await rollback(id, { key: READ_ONLY_KEY }))).toEqual([403, 'write_permission']);
        expect(outcome(await rollback(id, { key: FREE_KEY }))).toEqual([403, 'plan_required']);
        expect(outcome(await rollback(id, { key: NO_FEATURES_KEY }))).toEqual([403, 'plan_required']);
        expect(outcome(await rollback(id, { key: KILLED_KEY }))).toEqual([403, 'plan_required']);
        for (const confirm of [null, 'Experiments', 'rollback']) {
          expect(outcome(await rollback(id, { confirm }))).toEqual([400, 'missing_confirmation']);
        }
      }
      expect((await eventsOf(sql(), created.id)).map((e) => e.kind)).toEqual(['created', 'started']);
      expect((await get('/v1/experiments')).json.find((e: any) => e.id === created.id).status).toBe('active');
    });
  });

  describe('system transitions and the read for the chat path', () => {
    it('rollbackBySystem: active → rolled_back with no actor key and the reason; activeFor follows at once', async () => {
      const a = (await create()).json;
      const b = (await create()).json;
      const active = await service().activeFor('acme');
      expect(active.map((e) => e.id)).toEqual(expect.arrayContaining([a.id, b.id]));
      expect(active.every((e) => e.status === 'active' && e.orgId === 'acme')).toBe(true);
      const ended = await service().rollbackBySystem(a.id, 'candidate quality regressed', { candidate: { quality: 0.5 } });
      expect(ended).toMatchObject({ status: 'rolled_back', summary: { candidate: { quality: 0.5 } } });
      const events = await eventsOf(sql(), a.id);
      expect(events.at(-1)).toEqual({ kind: 'rolled_back', actor_api_key_id: null, org_id: 'acme', detail: { actor: 'system', reason: 'candidate quality regressed', from: 'active' } });
      const after = (await service().activeFor('acme')).map((e) => e.id);
      expect(after).not.toContain(a.id);
      expect(after).toContain(b.id);
      // A manual rollback of a system-rolled-back experiment is the idempotent case.
      expect((await rollback(a.id)).json.status).toBe('rolled_back');
      expect(await service().recordError(b.id, { reason: 'stats unavailable' })).toBe(true);
      expect((await eventsOf(sql(), b.id)).at(-1)).toMatchObject({ kind: 'error', actor_api_key_id: null, detail: { actor: 'system', reason: 'stats unavailable' } });
      expect(await service().recordError('00000000-0000-4000-8000-000000000009', {})).toBe(false);
    });
  });
}

describe('Experiments API (PGlite)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ yaml: yaml(10_000) });
  });
  afterAll(() => t.close());

  contractSuite(() => t);

  it('a failure inside the create transaction is 503 internal and leaves no row and no event', async () => {
    const sql = t.app.get(SqlStore);
    const original = sql.transaction.bind(sql);
    const pair = freshPair();
    // The `started` event is the last statement of the create: failing it must undo the row and the `created` event.
    const spy = jest.spyOn(sql, 'transaction').mockImplementation((fn) =>
      original((tx) =>
        fn({
          query: (text, params) => {
            if (text.includes('experiment_events') && params?.[2] === 'started') return Promise.reject(new Error('connection lost'));
            return tx.query(text, params);
          },
        }),
      ),
    );
    try {
      const r = await call(t.url, 'POST', '/v1/experiments', { body: JSON.stringify({ type: 'canary', ...pair, traffic_pct: 5 }) });
      expect([r.status, r.json]).toEqual([503, { error: { type: 'error', code: 'internal', message: 'The experiments store is unavailable.' } }]);
      expect(r.text).not.toContain('connection lost');
    } finally {
      spy.mockRestore();
    }
    const n = await count(sql, 'SELECT count(*)::int AS n FROM experiments WHERE baseline_model = $1 AND candidate_model = $2', [pair.baseline.model, pair.candidate.model]);
    expect(n).toBe(0);
    const orphans = await count(sql, 'SELECT count(*)::int AS n FROM experiment_events e WHERE NOT EXISTS (SELECT 1 FROM experiments x WHERE x.id = e.experiment_id)', []);
    expect(orphans).toBe(0);
    const again = await call(t.url, 'POST', '/v1/experiments', { body: JSON.stringify({ type: 'canary', ...pair, traffic_pct: 5 }) });
    expect(again.status).toBe(201);
  });
});

describe('create budget (PGlite, default 20 per organisation per hour)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({ yaml: yaml() });
  });
  afterAll(() => t.close());
  const create = (body: Record<string, unknown>, key = PRO_KEY) => call(t.url, 'POST', '/v1/experiments', { key, body: JSON.stringify(body) });

  it('the 21st create in an hour is 429 rate_limited with Retry-After; 409s spend it, 400s do not; 429 comes before 409', async () => {
    expect(t.config.gateway.limits.experiment_creates_per_hour).toBe(20);
    // 400s come first and spend nothing.
    for (let i = 0; i < 5; i++) {
      expect(code(await create(createBody({ traffic_pct: 101 })))).toBe('invalid_traffic_pct');
      expect(code(await create(createBody({ colour: 1 })))).toBe('invalid_body');
    }
    const taken = createBody();
    expect((await create(taken)).status).toBe(201);
    expect(code(await create(taken))).toBe('active_already_exists');
    for (let i = 0; i < 18; i++) expect((await create(createBody())).status).toBe(201);

    const over = await create(createBody());
    expect(outcome(over)).toEqual([429, 'rate_limited']);
    const retry = Number(over.headers.get('retry-after'));
    expect(retry).toBeGreaterThanOrEqual(3_500);
    expect(retry).toBeLessThanOrEqual(3_600);
    // Over budget, a duplicate pair is 429, not 409; a 400 is still a 400.
    expect(code(await create(taken))).toBe('rate_limited');
    expect(code(await create(createBody({ traffic_pct: -1 })))).toBe('invalid_traffic_pct');
    // Per organisation: another one still creates; rollback has no budget.
    expect((await create(createBody(), OTHER_KEY)).status).toBe(201);
    const list = await call(t.url, 'GET', '/v1/experiments');
    const rolled = await call(t.url, 'POST', `/v1/experiments/${list.json[0].id}/rollback`);
    expect(rolled.status).toBe(200);
    expect(await count(t.app.get(SqlStore), `SELECT count(*)::int AS n FROM experiments WHERE org_id = 'acme'`, [])).toBe(19);
  });

  it('cache store down: the budget is counted in the analytics store (never unlimited)', async () => {
    const cache = t.app.get(CacheStore);
    const spy = jest.spyOn(cache, 'hitWindows').mockRejectedValue(new Error('redis down'));
    try {
      const sql = t.app.get(SqlStore);
      const already = await count(sql, `SELECT count(*)::int AS n FROM experiments WHERE org_id = 'third'`, []);
      for (let i = already; i < 20; i++) expect((await create(createBody(), THIRD_KEY)).status).toBe(201);
      const over = await create(createBody(), THIRD_KEY);
      expect(outcome(over)).toEqual([429, 'rate_limited']);
      expect(Number(over.headers.get('retry-after'))).toBeGreaterThanOrEqual(3_500);
      expect(spy).toHaveBeenCalled();
      expect(await count(sql, `SELECT count(*)::int AS n FROM experiments WHERE org_id = 'third'`, [])).toBe(20);
    } finally {
      spy.mockRestore();
    }
  });
});

describeWithPostgres('Experiments API (real Postgres)', () => {
  let db: TestDatabase;
  let t: TestApp;
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await startTestApp({ yaml: yaml(25), env: { DATABASE_URL: db.url, GATEWAY_KEY_PEPPER: 'experiments-test-pepper' } });
  });
  afterAll(async () => {
    await t?.close();
    await db?.drop();
  });
  const create = (body: Record<string, unknown>, key = PRO_KEY) => call(t.url, 'POST', '/v1/experiments', { key, body: JSON.stringify(body) });
  const sql = () => t.app.get(SqlStore);

  it('create, list, rollback of active and rolled_back, 409 on completed, byte-identical 404s, events per call', async () => {
    const created = await create(createBody({ traffic_pct: 33.3 }));
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({ status: 'active', traffic_pct: 33.3, ended_at: null, summary: null, started_at: expect.stringMatching(ISO_UTC) });
    const second = (await create(createBody())).json;
    const list = await call(t.url, 'GET', '/v1/experiments');
    expect(list.json.map((e: any) => e.id)).toEqual([second.id, created.json.id]);

    const r1 = await call(t.url, 'POST', `/v1/experiments/${created.json.id}/rollback`);
    const r2 = await call(t.url, 'POST', `/v1/experiments/${created.json.id}/rollback`);
    expect([r1.status, r1.json.status, r2.status, r2.text]).toEqual([200, 'rolled_back', 200, r1.text]);
    expect((await eventsOf(sql(), created.json.id)).map((e) => e.kind)).toEqual(['created', 'started', 'rolled_back', 'rolled_back']);

    await t.app.get(ExperimentsService).complete(second.id, { note: 'done' });
    expect(outcome(await call(t.url, 'POST', `/v1/experiments/${second.id}/rollback`))).toEqual([409, 'completed_cannot_rollback']);

    const foreign = (await create(createBody(), OTHER_KEY)).json;
    const replies = await Promise.all(
      ['00000000-0000-4000-8000-000000000000', 'not-a-uuid', foreign.id, `{${foreign.id}}`].map((id) => call(t.url, 'POST', `/v1/experiments/${id}/rollback`)),
    );
    expect(replies.map((r) => r.status)).toEqual([404, 404, 404, 404]);
    expect(new Set(replies.map((r) => r.text)).size).toBe(1);
  });

  it('20 concurrent creates for one pair across pool connections: exactly one 201, the rest 409', async () => {
    const pair = freshPair();
    const replies = await Promise.all(Array.from({ length: 20 }, () => create({ type: 'canary', ...pair, traffic_pct: 10 }, OTHER_KEY)));
    expect(replies.map((r) => r.status).sort()).toEqual([201, ...Array(19).fill(409)]);
    expect(await count(sql(), `SELECT count(*)::int AS n FROM experiments WHERE org_id = 'other' AND baseline_model = $1 AND candidate_model = $2`, [pair.baseline.model, pair.candidate.model])).toBe(1);
  });

  it('cache store down: concurrent creates cannot pass the budget counted in Postgres', async () => {
    const spy = jest.spyOn(t.app.get(CacheStore), 'hitWindows').mockRejectedValue(new Error('redis down'));
    try {
      const replies = await Promise.all(Array.from({ length: 30 }, () => create(createBody(), THIRD_KEY)));
      const statuses = replies.map((r) => r.status).sort();
      expect(statuses).toEqual([...Array(25).fill(201), ...Array(5).fill(429)]);
    } finally {
      spy.mockRestore();
    }
  });
});

describeWithPostgres('Experiments API while Postgres refuses connections', () => {
  let db: TestDatabase;
  let t: TestApp;
  let admin: Client;
  const dbName = () => new URL(db.url).pathname.slice(1);
  beforeAll(async () => {
    db = await createTestDatabase();
    t = await startTestApp({ yaml: yaml(100), env: { DATABASE_URL: db.url, GATEWAY_KEY_PEPPER: 'experiments-test-pepper' } });
    admin = new Client({ connectionString: TEST_DATABASE_URL });
    await admin.connect();
  });
  afterAll(async () => {
    await admin?.query(`ALTER DATABASE "${dbName()}" ALLOW_CONNECTIONS true`).catch(() => undefined);
    await admin?.end();
    await t?.close();
    await db?.drop();
  });

  it('create, rollback and list answer 503 internal promptly and change nothing', async () => {
    const created = (await create(createBody())).json;
    // Keys are authenticated once while the store is up (the key cache then carries them).
    expect((await call(t.url, 'GET', '/v1/experiments', { key: WRITE_ONLY_KEY })).status).toBe(403);
    expect((await call(t.url, 'GET', '/v1/experiments')).status).toBe(200);

    expect(/^gw_test_[a-z0-9_]+$/.test(dbName())).toBe(true);
    await admin.query(`ALTER DATABASE "${dbName()}" ALLOW_CONNECTIONS false`);
    await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [dbName()]);

    const down = { error: { type: 'error', code: 'internal', message: 'The experiments store is unavailable.' } };
    const started = Date.now();
    const replies = [
      await create(createBody()),
      await create(createBody(), WRITE_ONLY_KEY),
      await call(t.url, 'POST', `/v1/experiments/${created.id}/rollback`),
      await call(t.url, 'GET', '/v1/experiments'),
    ];
    for (const r of replies) expect([r.status, r.json]).toEqual([503, down]);
    expect(Date.now() - started).toBeLessThan(15_000);

    await admin.query(`ALTER DATABASE "${dbName()}" ALLOW_CONNECTIONS true`);
    const after = await eventually(() => call(t.url, 'GET', '/v1/experiments'), (r) => r.status === 200);
    expect(after.json).toEqual([created]);
    expect((await eventsOf(t.app.get(SqlStore), created.id)).map((e) => e.kind)).toEqual(['created', 'started']);
  });

  const create = (body: Record<string, unknown>, key = PRO_KEY) => call(t.url, 'POST', '/v1/experiments', { key, body: JSON.stringify(body) });
});

describeWithPostgres('Experiments API when the Postgres server stops', () => {
  interface ThrowawayServer {
    url: string;
    stop(): void;
  }
  const servers = require('../scripts/test-servers') as { startPostgres(): Promise<ThrowawayServer | { skipped: string }> };

  it('writes and list answer 503 internal; liveness is untouched', async () => {
    const pg = await servers.startPostgres();
    if ('skipped' in pg) throw new Error(`cannot start a throwaway Postgres: ${pg.skipped}`);
    let t: TestApp | undefined;
    try {
      t = await startTestApp({ yaml: yaml(100), env: { DATABASE_URL: pg.url, GATEWAY_KEY_PEPPER: 'experiments-test-pepper' } });
      const created = await call(t.url, 'POST', '/v1/experiments', { body: JSON.stringify(createBody()) });
      expect(created.status).toBe(201);
      const experiments = t.app.get(ExperimentsService);
      expect((await experiments.activeFor('acme')).map((e) => e.id)).toEqual([created.json.id]);
      pg.stop();
      const down = { error: { type: 'error', code: 'internal', message: 'The experiments store is unavailable.' } };
      const app = t;
      const write = await eventually(() => call(app.url, 'POST', '/v1/experiments', { body: JSON.stringify(createBody()) }), (r) => r.status === 503);
      expect(write.json).toEqual(down);
      const roll = await call(t.url, 'POST', `/v1/experiments/${created.json.id}/rollback`);
      expect([roll.status, roll.json]).toEqual([503, down]);
      const list = await call(t.url, 'GET', '/v1/experiments');
      expect([list.status, list.json]).toEqual([503, down]);
      expect((await call(t.url, 'GET', '/health', { key: null })).status).toBe(200);
      // The chat path's read never throws: past its cache time it keeps the last list it saw, else none.
      await sleep(1_100);
      expect((await experiments.activeFor('acme')).map((e) => e.id)).toEqual([created.json.id]);
      expect(await experiments.activeFor('other')).toEqual([]);
    } finally {
      await t?.close();
      pg.stop();
    }
  });
});

/** Retries `fn` until `done` holds (a store outage takes a moment to be seen), within `ms`. */
async function eventually(fn: () => Promise<Reply>, done: (r: Reply) => boolean, ms = 10_000): Promise<Reply> {
  const until = Date.now() + ms;
  for (;;) {
    const r = await fn();
    if (done(r) || Date.now() > until) return r;
    await sleep(200);
  }
}
