/**
 * One contract for both analytics-store adapters: PGlite and a real Postgres must
 * give the same answers to the same SQL, so repositories can be written once.
 */
import { ANALYTICS_MIGRATIONS, readMigrations, runMigrations } from '../../src/stores/sql/migrator';
import type { SqlStore } from '../../src/stores/sql/sql-store';

export interface SqlStoreHandle {
  store: SqlStore;
  /** Another client of the same database, as a second replica would have (PGlite: the same store). */
  peer(): Promise<SqlStore>;
  cleanup(): Promise<void>;
}

export type MakeSqlStore = (options: { migrated: boolean }) => Promise<SqlStoreHandle>;

export const ALL_TABLES = [
  'api_keys',
  'decision_traces',
  'experiment_events',
  'experiments',
  'feedback',
  'model_stats',
  'monthly_usage',
  'organizations',
  'regressions',
  'schema_migrations',
];

const INSERT_ORG = `INSERT INTO organizations (id, name, plan, features, monthly_request_limit) VALUES ($1, $2, $3, $4, $5)`;
const INSERT_EXPERIMENT = `INSERT INTO experiments (org_id, type, status, traffic_pct, baseline_provider, baseline_model,
  candidate_provider, candidate_model, min_n, max_regression) VALUES ($1, 'canary', $2, 10, 'openai', 'gpt-4o-mini', 'anthropic', 'claude-haiku', 100, 0.05)
  RETURNING id`;

let seq = 0;
const uniqueId = (prefix: string): string => `${prefix}-${process.pid}-${Date.now()}-${seq++}`;

export function sqlStoreContract(name: string, makeStore: MakeSqlStore): void {
  describe(`SqlStore contract: ${name}`, () => {
    describe('migrations', () => {
      let h: SqlStoreHandle;
      beforeAll(async () => {
        h = await makeStore({ migrated: false });
      });
      afterAll(() => h?.cleanup());

      it('applies every file once, in order, also when two replicas start together, and nothing on a re-run', async () => {
        const files = readMigrations(ANALYTICS_MIGRATIONS.dir).map((m) => ({ version: m.version, name: m.name }));
        expect(files.length).toBeGreaterThan(0);
        const peer = await h.peer();
        const [a, b] = await Promise.all([runMigrations(h.store, ANALYTICS_MIGRATIONS), runMigrations(peer, ANALYTICS_MIGRATIONS)]);
        // Between them the two runs applied each file exactly once.
        expect([...a, ...b].sort((x, y) => x.version - y.version)).toEqual(files);
        expect(await runMigrations(h.store, ANALYTICS_MIGRATIONS)).toEqual([]);
        const { rows } = await h.store.query<{ version: number; name: string; applied_at: Date }>(
          'SELECT version, name, applied_at FROM schema_migrations ORDER BY version',
          [],
        );
        expect(rows.map((r) => ({ version: r.version, name: r.name }))).toEqual(files);
        expect(rows[0].applied_at).toBeInstanceOf(Date);
      });

      it('creates every table of the schema', async () => {
        const { rows } = await h.store.query<{ table_name: string }>(
          `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_name = ANY($1) ORDER BY table_name`,
          [ALL_TABLES],
        );
        expect(rows.map((r) => r.table_name)).toEqual(ALL_TABLES);
      });
    });

    describe('on a migrated database', () => {
      let h: SqlStoreHandle;
      let store: SqlStore;
      beforeAll(async () => {
        h = await makeStore({ migrated: true });
        store = h.store;
      });
      afterAll(() => h?.cleanup());

      it('answers ping', async () => {
        await expect(store.ping(2_000)).resolves.toBeUndefined();
      });

      it('runs parameterised queries and maps rows to the same JS types on both adapters', async () => {
        const id = uniqueId('org');
        const ins = await store.query(INSERT_ORG, [id, 'Acme "quoted", {braces}', 'pro', ['explain', 'has_test_ab'], 100_000]);
        expect(ins.rowCount).toBe(1);
        const { rows, rowCount } = await store.query<Record<string, unknown>>(
          'SELECT id, name, plan, features, kill_switches, monthly_request_limit, created_at FROM organizations WHERE id = $1',
          [id],
        );
        expect(rowCount).toBe(1);
        expect(rows).toEqual([
          {
            id,
            name: 'Acme "quoted", {braces}',
            plan: 'pro',
            features: ['explain', 'has_test_ab'],
            kill_switches: [],
            monthly_request_limit: 100_000,
            created_at: expect.any(Date),
          },
        ]);
        expect(Math.abs((rows[0].created_at as Date).getTime() - Date.now())).toBeLessThan(60_000);
      });

      it('gives identical scalar types: int8, date, timestamptz, jsonb, uuid, float8, bool, null', async () => {
        const { rows } = await store.query<Record<string, unknown>>(
          `SELECT $1::int8 AS small, 9007199254740993::int8 AS big, '{1,2}'::int8[] AS bigs, '2024-05-01'::date AS day,
                  $2::timestamptz AS at, $3::jsonb AS doc, '6f1c0a52-4c39-4c2f-9a52-8b1f6f3b2a10'::uuid AS id,
                  0.25::float8 AS f, true AS b, NULL::text AS nothing, 12.50::numeric AS money`,
          [42, new Date('2024-05-01T12:34:56.789Z'), JSON.stringify({ a: [1, 'x'], b: null })],
        );
        expect(rows[0]).toEqual({
          small: 42,
          big: 9007199254740993n,
          bigs: [1, 2],
          day: '2024-05-01',
          at: new Date('2024-05-01T12:34:56.789Z'),
          doc: { a: [1, 'x'], b: null },
          id: '6f1c0a52-4c39-4c2f-9a52-8b1f6f3b2a10',
          f: 0.25,
          b: true,
          nothing: null,
          money: '12.50',
        });
      });

      it('works in UTC whatever the server zone, so month boundaries agree', async () => {
        const { rows } = await store.query<{ tz: string; month: string }>(
          `SELECT current_setting('TimeZone') AS tz, date_trunc('month', '2024-01-31T23:30:00Z'::timestamptz)::date AS month`,
          [],
        );
        expect(['UTC', 'Etc/UTC']).toContain(rows[0].tz);
        expect(rows[0].month).toBe('2024-01-01');
      });

      it('reports rowCount as affected rows for writes and as returned rows for reads', async () => {
        const org = uniqueId('org');
        await store.query(INSERT_ORG, [org, 'n', 'free', [], null]);
        const ins = await store.query(
          `INSERT INTO monthly_usage (org_id, month, count) VALUES ($1, '2024-01-01', 1), ($1, '2024-02-01', 2)`,
          [org],
        );
        expect(ins.rowCount).toBe(2);
        expect((await store.query('UPDATE monthly_usage SET count = count + 1 WHERE org_id = $1 AND month = $2', [org, '1999-01-01'])).rowCount).toBe(0);
        const upd = await store.query<{ count: number }>(
          'UPDATE monthly_usage SET count = count + 10 WHERE org_id = $1 RETURNING count',
          [org],
        );
        expect(upd.rowCount).toBe(2);
        expect(upd.rows.map((r) => r.count).sort()).toEqual([11, 12]);
        const sel = await store.query('SELECT month FROM monthly_usage WHERE org_id = $1 ORDER BY month', [org]);
        expect(sel).toEqual({ rows: [{ month: '2024-01-01' }, { month: '2024-02-01' }], rowCount: 2 });
      });

      it('runs a parameterless multi-statement script and returns the last statement’s rows', async () => {
        const res = await store.query('CREATE TEMP TABLE script_probe (x int); INSERT INTO script_probe VALUES (1), (2); SELECT sum(x)::int AS total FROM script_probe', []);
        expect(res.rows).toEqual([{ total: 3 }]);
      });

      it('refuses invalid rows with the Postgres SQLSTATE (check constraint, foreign key)', async () => {
        await expect(store.query(INSERT_ORG, [uniqueId('org'), 'n', 'enterprise', [], null])).rejects.toMatchObject({ code: '23514' });
        await expect(store.query(INSERT_EXPERIMENT, ['no-such-org', 'active'])).rejects.toMatchObject({ code: '23503' });
      });

      it('commits a transaction and returns its result', async () => {
        const id = uniqueId('org');
        const out = await store.transaction(async (tx) => {
          await tx.query(INSERT_ORG, [id, 'in tx', 'free', [], null]);
          return (await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM organizations WHERE id = $1', [id])).rows[0].n;
        });
        expect(out).toBe(1);
        expect((await store.query('SELECT 1 FROM organizations WHERE id = $1', [id])).rowCount).toBe(1);
      });

      it('rolls a transaction back when its function throws, rethrowing the same error', async () => {
        const id = uniqueId('org');
        const boom = new Error('boom');
        await expect(
          store.transaction(async (tx) => {
            await tx.query(INSERT_ORG, [id, 'in tx', 'free', [], null]);
            throw boom;
          }),
        ).rejects.toBe(boom);
        expect((await store.query('SELECT 1 FROM organizations WHERE id = $1', [id])).rowCount).toBe(0);
      });

      it('rolls back after an SQL error inside the transaction and stays usable', async () => {
        const id = uniqueId('org');
        await expect(
          store.transaction(async (tx) => {
            await tx.query(INSERT_ORG, [id, 'first', 'free', [], null]);
            await tx.query(INSERT_ORG, [id, 'duplicate', 'free', [], null]);
          }),
        ).rejects.toMatchObject({ code: '23505' });
        expect((await store.query('SELECT 1 FROM organizations WHERE id = $1', [id])).rowCount).toBe(0);
        await expect(store.query('SELECT 1 AS ok', [])).resolves.toMatchObject({ rows: [{ ok: 1 }] });
      });

      it("indexes decision_traces by experiment, so the experiment stats read one experiment's traces through it", async () => {
        const { rows } = await store.query<{ indexdef: string }>(`SELECT indexdef FROM pg_indexes WHERE tablename = 'decision_traces' AND indexname = 'decision_traces_experiment_idx'`, []);
        // A partitioned index (decision_traces is partitioned by day, 0005): each partition has its own copy.
        expect(rows.map((r) => r.indexdef)).toEqual([
          'CREATE INDEX decision_traces_experiment_idx ON ONLY public.decision_traces USING btree (experiment_id, created_at) WHERE (experiment_id IS NOT NULL)',
        ]);
        // The filter of experiment-stats.repository.ts's ARM_STATS, planned as it is sent (bound parameters).
        // Sequential scans are priced out so the test does not depend on the table's size or statistics.
        const plan = await store.transaction(async (tx) => {
          await tx.query('SET LOCAL enable_seqscan = off', []);
          const r = await tx.query<{ 'QUERY PLAN': string }>(
            `EXPLAIN SELECT experiment_arm, status, session_id FROM decision_traces
             WHERE experiment_id = $1::uuid AND org_id = $2 AND created_at >= $3::timestamptz - interval '5 minutes'`,
            ['6f1c0a52-4c39-4c2f-9a52-8b1f6f3b2a10', 'acme', new Date().toISOString()],
          );
          return r.rows.map((x) => x['QUERY PLAN']).join('\n');
        });
        const copies = await store.query<{ name: string }>(
          `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'decision_traces_experiment_idx'::regclass`,
          [],
        );
        expect(copies.rows.length).toBeGreaterThan(0);
        expect(copies.rows.some((c) => plan.includes(c.name))).toBe(true);
      });

      it('refuses statements on a transaction that has finished', async () => {
        let leaked: { query(sql: string, params?: readonly unknown[]): Promise<unknown> } | undefined;
        await store.transaction(async (tx) => {
          leaked = tx;
        });
        await expect(leaked!.query('SELECT 1', [])).rejects.toThrow(/finished/);
      });

      it('keeps other callers’ statements out of a running transaction', async () => {
        const inside = uniqueId('org');
        const outside = uniqueId('org');
        let entered!: () => void;
        let release!: () => void;
        const inTx = new Promise<void>((r) => (entered = r));
        const gate = new Promise<void>((r) => (release = r));
        const tx = store.transaction(async (t) => {
          await t.query(INSERT_ORG, [inside, 'inside', 'free', [], null]);
          entered();
          await gate;
          throw new Error('roll back');
        });
        await inTx;
        // Issued while the transaction is open: on a shared connection it would run inside it and be rolled back too.
        const other = store.query(INSERT_ORG, [outside, 'outside', 'free', [], null]);
        await new Promise((r) => setTimeout(r, 50));
        release();
        await expect(tx).rejects.toThrow('roll back');
        await other;
        const { rows } = await store.query<{ id: string }>('SELECT id FROM organizations WHERE id = ANY($1) ORDER BY id', [[inside, outside]]);
        expect(rows).toEqual([{ id: outside }]);
      });

      it('serves many concurrent queries and transactions without losing or mixing any', async () => {
        const org = uniqueId('org');
        await store.query(INSERT_ORG, [org, 'n', 'free', [], null]);
        const writes = Array.from({ length: 40 }, (_, i) =>
          i % 2 === 0
            ? store.query(`INSERT INTO regressions (org_id, provider, model, reason) VALUES ($1, 'p', 'm', $2)`, [org, `q${i}`])
            : store.transaction(async (tx) => {
                await tx.query(`INSERT INTO regressions (org_id, provider, model, reason) VALUES ($1, 'p', 'm', $2)`, [org, `t${i}`]);
                if (i % 4 === 1) throw new Error('abort');
              }),
        );
        const results = await Promise.allSettled(writes);
        expect(results.filter((r) => r.status === 'rejected')).toHaveLength(10);
        const { rows } = await store.query<{ reason: string }>('SELECT reason FROM regressions WHERE org_id = $1', [org]);
        const expected = Array.from({ length: 40 }, (_, i) => i)
          .filter((i) => i % 4 !== 1)
          .map((i) => (i % 2 === 0 ? `q${i}` : `t${i}`));
        expect(rows.map((r) => r.reason).sort()).toEqual(expected.sort());
      });

      it('allows one active experiment per (org, baseline, candidate), any number of finished ones', async () => {
        const org = uniqueId('org');
        await store.query(INSERT_ORG, [org, 'n', 'pro', [], null]);
        await store.query(INSERT_EXPERIMENT, [org, 'active']);
        await expect(store.query(INSERT_EXPERIMENT, [org, 'active'])).rejects.toMatchObject({ code: '23505' });
        await store.query(INSERT_EXPERIMENT, [org, 'completed']);
        await store.query(INSERT_EXPERIMENT, [org, 'rolled_back']);
        const other = uniqueId('org');
        await store.query(INSERT_ORG, [other, 'n', 'pro', [], null]);
        await store.query(INSERT_EXPERIMENT, [other, 'active']);
        const { rows } = await store.query<{ status: string; id: string }>('SELECT status, id FROM experiments WHERE org_id = $1 ORDER BY created_at DESC, id DESC', [org]);
        expect(rows.map((r) => r.status).sort()).toEqual(['active', 'completed', 'rolled_back']);
        expect(rows[0].id).toMatch(/^[0-9a-f-]{36}$/);
      });

      it('records experiment events and feedback with their constraints', async () => {
        const org = uniqueId('org');
        await store.query(INSERT_ORG, [org, 'n', 'pro', [], null]);
        const { rows } = await store.query<{ id: string }>(INSERT_EXPERIMENT, [org, 'active']);
        const event = await store.query<{ id: number; detail: unknown }>(
          `INSERT INTO experiment_events (experiment_id, org_id, kind, detail) VALUES ($1, $2, 'created', $3) RETURNING id, detail`,
          [rows[0].id, org, JSON.stringify({ by: 'test' })],
        );
        expect(event.rows[0]).toEqual({ id: expect.any(Number), detail: { by: 'test' } });
        await expect(
          store.query(`INSERT INTO experiment_events (experiment_id, org_id, kind) VALUES ($1, $2, 'paused')`, [rows[0].id, org]),
        ).rejects.toMatchObject({ code: '23514' });
        await expect(store.query('INSERT INTO feedback (org_id, session_id, score, useful) VALUES ($1, $2, $3, $4)', [org, 's', 11, true])).rejects.toMatchObject({
          code: '23514',
        });
        const upsert = `INSERT INTO feedback (org_id, session_id, score, useful) VALUES ($1, $2, $3, $4)
          ON CONFLICT (org_id, session_id) DO UPDATE SET score = EXCLUDED.score, useful = EXCLUDED.useful, updated_at = now()`;
        await store.query(upsert, [org, 's', 3, false]);
        await store.query(upsert, [org, 's', 9, true]);
        expect((await store.query('SELECT score, useful FROM feedback WHERE org_id = $1', [org])).rows).toEqual([{ score: 9, useful: true }]);
      });
    });
  });
}
