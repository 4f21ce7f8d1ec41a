import { Client } from 'pg';
import { makeConfig, memoryLogger } from '../../test/support/kit';
import { createTestPglite } from '../../test/support/pglite';
import { createTestDatabase, createTestStore } from '../../test/support/postgres';
import { describeWithPostgres } from '../../test/support/real-servers';
import { expectUtcMidnightSplit, migrationsUpTo, partitions, populateOldTable, trace } from '../../test/stores/decision-traces-by-day.contract';
import { MetricsService } from '../metrics/metrics.service';
import { StoreFallback } from '../resilience/store-fallback';
import { ANALYTICS_MIGRATIONS, runMigrations } from '../stores/sql/migrator';
import { PgSqlStore } from '../stores/sql/pg-sql.store';
import type { SqlStore } from '../stores/sql/sql-store';
import { DecisionTracesRepository } from '../traces/decision-traces.repository';
import { DAY_MS, dayPartitionName, DEFAULT_PARTITION, utcDayStart } from './partition-days';
import { RetentionJob } from './retention.job';
import { RetentionRepository } from './retention.repository';
import { RetentionBoundError, RetentionService } from './retention.service';
import { TracePartitionsRepository } from './trace-partitions.repository';

/** A day far from today, so what the migration made for the real days never gets in the way. */
const F = utcDayStart(Date.now()) + 100 * DAY_MS;

interface Rig {
  store: SqlStore;
  job: RetentionJob;
  service: RetentionService;
  clock: { now: number };
  lines: Record<string, unknown>[];
  count(where?: string): Promise<number>;
  placed(requestId: string): Promise<string[]>;
}

function rigFor(store: SqlStore, yaml = ''): Rig {
  const config = makeConfig(yaml);
  const metrics = new MetricsService();
  const { logger, lines } = memoryLogger();
  const service = new RetentionService(new TracePartitionsRepository(store), new RetentionRepository(store), config);
  const clock = { now: F };
  const job = new RetentionJob(service, new StoreFallback(metrics, logger), logger, metrics, { intervalMs: 0, now: () => clock.now });
  return {
    store,
    job,
    service,
    clock,
    lines,
    count: async (where = 'true') => (await store.query<{ n: number }>(`SELECT count(*)::int AS n FROM decision_traces WHERE ${where}`, [])).rows[0].n,
    placed: async (requestId) =>
      (await store.query<{ part: string }>(`SELECT tableoid::regclass::text AS part FROM decision_traces WHERE request_id = $1`, [requestId])).rows.map((r) => r.part),
  };
}

const names = async (store: SqlStore) => (await partitions(store)).map((p) => p.name);
const days = (from: number, n: number) => Array.from({ length: n }, (_, i) => dayPartitionName(from + i * DAY_MS));

function retentionSuite(name: string, migrated: () => Promise<{ store: SqlStore; cleanup(): Promise<void> }>): void {
  describe(`retention job on ${name}`, () => {
    const cleanups: Array<() => Promise<void>> = [];
    afterEach(async () => {
      for (const c of cleanups.splice(0).reverse()) await c();
    });
    async function rig(yaml = ''): Promise<Rig> {
      const { store, cleanup } = await migrated();
      cleanups.push(cleanup);
      return rigFor(store, yaml);
    }

    it('makes one partition per UTC day for the coming week, and the next day once midnight has passed', async () => {
      const r = await rig();
      r.clock.now = F + DAY_MS - 1; // 23:59:59.999 UTC
      const first = await r.job.run();
      expect(first).toMatchObject({ outcome: 'done', partitions: { created: days(F, 8), adopted: [], busy: false } });
      r.clock.now = F + DAY_MS; // 00:00:00.000 UTC the next day
      expect((await r.job.run()).partitions?.created).toEqual([dayPartitionName(F + 8 * DAY_MS)]);
      // Nothing left to do: no partition made, nothing logged.
      const before = r.lines.length;
      expect((await r.job.run()).partitions?.created).toEqual([]);
      expect(r.lines.slice(before).filter((l) => l.topic === 'retention')).toEqual([]);
      expect(await names(r.store)).toEqual(expect.arrayContaining([...days(F, 9), DEFAULT_PARTITION]));
      await expectUtcMidnightSplit(r.store, F + DAY_MS);
    });

    it("moves the default partition's traces of a day into that day's partition when it makes it", async () => {
      const r = await rig();
      const repo = new DecisionTracesRepository(r.store);
      // Written before the day had a partition (a clock ahead, a replica whose job had not run).
      const early = trace({ requestId: 'early', createdAt: new Date(F + 3 * DAY_MS + 5_000) });
      await repo.write([early]);
      expect(await r.placed('early')).toEqual([DEFAULT_PARTITION]);
      const run = await r.job.run();
      expect(run.partitions?.adopted).toEqual([{ name: dayPartitionName(F + 3 * DAY_MS), rows: 1 }]);
      expect(run.partitions?.created).toEqual(days(F, 8).filter((n) => n !== dayPartitionName(F + 3 * DAY_MS)));
      expect(await r.placed('early')).toEqual([dayPartitionName(F + 3 * DAY_MS)]);
      // Written again (a replay): still one row, in the day's partition.
      await repo.write([early]);
      expect(await r.count(`request_id = 'early'`)).toBe(1);
      expect(r.lines.filter((l) => l.topic === 'retention')).toHaveLength(1);
    });

    it('drops whole days past retention (never the day the cutoff falls in) and deletes the stray old traces of the default partition; a dry run changes nothing', async () => {
      const r = await rig();
      await r.job.run();
      const repo = new DecisionTracesRepository(r.store);
      for (let d = 0; d < 3; d++) {
        await repo.write(Array.from({ length: 5 }, (_, i) => trace({ requestId: `d${d}-${i}`, createdAt: new Date(F + d * DAY_MS + i * 3_600_000) })));
      }
      await repo.write([trace({ requestId: 'stray', createdAt: new Date(F - 5 * DAY_MS) })]);
      expect(await r.placed('stray')).toEqual([DEFAULT_PARTITION]);
      const total = await r.count();

      // 30 days (the default, the learning window) after noon of the third day.
      const now = F + 2 * DAY_MS + 12 * 3_600_000 + 30 * DAY_MS;
      const dry = await r.service.prune({ now, dryRun: true, wait: true });
      expect(dry.cutoffs.traces).toEqual(new Date(F + 2 * DAY_MS + 12 * 3_600_000));
      const dropped = dry.actions.filter((a) => a.action === 'drop').map((a) => a.object);
      expect(dropped).toEqual(expect.arrayContaining(days(F, 2)));
      expect(dropped).not.toContain(dayPartitionName(F + 2 * DAY_MS));
      expect(dry.actions).toEqual(
        expect.arrayContaining([
          { target: 'decision_traces', object: dayPartitionName(F), action: 'drop', rows: 5, bytes: expect.any(Number) },
          { target: 'decision_traces', object: DEFAULT_PARTITION, action: 'delete', rows: 1 },
        ]),
      );
      expect(await r.count()).toBe(total);
      expect(await names(r.store)).toEqual(expect.arrayContaining(days(F, 2)));

      r.clock.now = now;
      const run = await r.job.run();
      expect(run.outcome).toBe('done');
      expect(run.pruned?.actions).toEqual(dry.actions);
      const left = await names(r.store);
      expect(left).not.toContain(dayPartitionName(F));
      expect(left).not.toContain(dayPartitionName(F + DAY_MS));
      expect(left).toContain(dayPartitionName(F + 2 * DAY_MS));
      expect(await r.count()).toBe(5);
      expect(await r.count(`request_id LIKE 'd2-%'`)).toBe(5);
      // Days ahead of the new date were made, and another run finds nothing to prune.
      expect(left).toContain(dayPartitionName(utcDayStart(now) + 7 * DAY_MS));
      expect((await r.job.run()).pruned?.actions).toEqual([]);
    });

    it("seals the days that are over: summarizes the BRIN ranges VACUUM leaves without a summary; never today's", async () => {
      const r = await rig();
      r.clock.now = F + 12 * 3_600_000;
      await r.job.run();
      const repo = new DecisionTracesRepository(r.store);
      // More than one range of 128 pages a day: the first range of a partition made empty has its
      // summary from the index build; the ones after it get theirs once full.
      for (const day of [F, F + DAY_MS]) {
        for (let b = 0; b < 9; b++) {
          await repo.write(Array.from({ length: 1_000 }, (_, i) => trace({ requestId: `r-${day}-${b}-${i}`, sessionId: `s-${b}-${i}`, createdAt: new Date(day + (b * 1_000 + i) * 1_000) })));
        }
      }
      const pages = (await r.store.query<{ n: number }>(`SELECT (pg_relation_size($1) / current_setting('block_size')::int)::int AS n`, [dayPartitionName(F)])).rows[0].n;
      expect(pages).toBeGreaterThan(128);
      // VACUUM summarizes full ranges only: the last, partly filled one of each day stays without.
      await r.store.query('VACUUM decision_traces', []);
      const summarize = (name: string) => r.store.transaction((tx) => new TracePartitionsRepository(r.store).summarize(tx, name));

      r.clock.now = F + DAY_MS + 12 * 3_600_000;
      const run = await r.job.run();
      expect(run.outcome).toBe('done');
      // Day F is over: its last, partly filled range (of the txid index, at least) got its summary.
      expect(run.sealed).toEqual({ summarized: [{ name: dayPartitionName(F), ranges: expect.any(Number) }], busy: false });
      expect(run.sealed!.summarized[0].ranges).toBeGreaterThanOrEqual(1);
      expect(r.lines.filter((l) => l.topic === 'retention').at(-1)).toMatchObject({ summarized: run.sealed!.summarized });
      expect(await summarize(dayPartitionName(F))).toBe(0);
      // Nothing left to seal on the next run.
      expect((await r.job.run()).sealed).toEqual({ summarized: [], busy: false });
      // Today's partition was left alone: its last range is still without a summary.
      expect(await summarize(dayPartitionName(F + DAY_MS))).toBeGreaterThanOrEqual(1);
    });

    it('refuses a --before inside the learning window, and takes one at its start', async () => {
      const r = await rig('learning: { window_days: 14 }\nretention: { traces_days: 60 }');
      const now = F;
      expect(() => r.service.cutoffs(now, new Date(now - 13 * DAY_MS))).toThrow(RetentionBoundError);
      expect(() => r.service.cutoffs(now, new Date(now - 13 * DAY_MS))).toThrow(/inside the learning window \(learning\.window_days = 14\)/);
      await expect(r.service.prune({ now, before: new Date(now - DAY_MS), dryRun: false, wait: true })).rejects.toBeInstanceOf(RetentionBoundError);
      expect(r.service.cutoffs(now, new Date(now - 14 * DAY_MS)).traces).toEqual(new Date(now - 14 * DAY_MS));
      // Without --before, the configured 60 days.
      expect(r.service.cutoffs(now).traces).toEqual(new Date(now - 60 * DAY_MS));
    });

    it('deletes feedback, experiment events and rollup buckets past their retention, in batches; keeps events by default', async () => {
      const r = await rig('retention: { lifecycle_events_days: 10 }');
      const now = Date.now();
      r.clock.now = now;
      await r.store.query(`INSERT INTO organizations (id, name, plan) VALUES ('acme', 'Acme', 'pro') ON CONFLICT DO NOTHING`, []);
      await r.store.query(
        `INSERT INTO feedback (org_id, session_id, score, useful, created_at, updated_at)
         SELECT 'acme', 'old-' || g, 5, true, now() - interval '40 days', now() - interval '40 days' FROM generate_series(1, 6000) g
         UNION ALL SELECT 'acme', 'new-' || g, 5, true, now() - interval '40 days', now() - interval '1 day' FROM generate_series(1, 3) g`,
        [],
      );
      const { rows } = await r.store.query<{ id: string }>(
        `INSERT INTO experiments (org_id, type, status, traffic_pct, baseline_provider, baseline_model, candidate_provider, candidate_model, min_n, max_regression)
         VALUES ('acme', 'canary', 'completed', 10, 'a', 'x', 'b', 'y', 100, 0.05) RETURNING id`,
        [],
      );
      await r.store.query(
        `INSERT INTO experiment_events (experiment_id, org_id, kind, created_at) VALUES ($1, 'acme', 'created', now() - interval '20 days'), ($1, 'acme', 'completed', now())`,
        [rows[0].id],
      );
      const run = await r.job.run();
      expect(run.pruned?.actions).toEqual(
        expect.arrayContaining([
          { target: 'feedback', object: 'feedback', action: 'delete', rows: 6000 },
          { target: 'experiment_events', object: 'experiment_events', action: 'delete', rows: 1 },
        ]),
      );
      expect((await r.store.query<{ s: string }>(`SELECT string_agg(session_id, ',' ORDER BY session_id) AS s FROM feedback`, [])).rows[0].s).toBe('new-1,new-2,new-3');
      expect((await r.store.query<{ kind: string }>(`SELECT kind FROM experiment_events`, [])).rows).toEqual([{ kind: 'completed' }]);

      // The learning rollups' hourly buckets past retention.rollups_days (here 400): only whole hours before the cutoff.
      await r.store.query(
        `INSERT INTO rollup_model_hours (org_id, provider, model, bucket)
         VALUES ('acme', 'p', 'm', date_trunc('hour', now()) - interval '401 days'), ('acme', 'p', 'm', date_trunc('hour', now()) - interval '10 days')`,
        [],
      );
      const rollups = await r.job.run();
      expect(rollups.pruned?.actions).toEqual([{ target: 'rollups', object: 'rollup_model_hours', action: 'delete', rows: 1 }]);
      expect((await r.store.query<{ n: number }>(`SELECT count(*)::int AS n FROM rollup_model_hours`, [])).rows[0].n).toBe(1);

      const kept = rigFor(r.store);
      kept.clock.now = now + 400 * DAY_MS;
      expect((await kept.service.prune({ now: kept.clock.now, dryRun: true, wait: true })).actions.filter((a) => a.target === 'experiment_events')).toEqual([]);
    });
  });
}

retentionSuite('PGlite', async () => {
  const store = await createTestPglite();
  return { store, cleanup: () => store.close() };
});

describe('retention of an existing deployment on PGlite', () => {
  it("drops the old traces' partition whole once its bound day is past retention", async () => {
    const store = await createTestPglite({ migrated: false });
    const old = migrationsUpTo(4);
    try {
      await runMigrations(store, old.set);
      await populateOldTable(store, 2_000);
      await runMigrations(store, ANALYTICS_MIGRATIONS);
      const legacy = (await names(store)).find((n) => n.startsWith('decision_traces_before_'))!;
      const bound = Date.UTC(Number(legacy.slice(-8, -4)), Number(legacy.slice(-4, -2)) - 1, Number(legacy.slice(-2)));
      const r = rigFor(store);
      r.clock.now = bound + 30 * DAY_MS - 1;
      expect((await r.job.run()).pruned?.actions.map((a) => a.object)).not.toContain(legacy);
      r.clock.now = bound + 30 * DAY_MS;
      const run = await r.job.run();
      expect(run.pruned?.actions).toContainEqual({ target: 'decision_traces', object: legacy, action: 'drop', rows: 2_000, bytes: expect.any(Number) });
      expect(await names(store)).not.toContain(legacy);
    } finally {
      old.cleanup();
      await store.close();
    }
  });
});

describeWithPostgres('on a real Postgres', () => {
  retentionSuite('Postgres', () => createTestStore());

  it('lets one replica at a time do a step: a run that finds the lock held skips, the next one does the work', async () => {
    const db = await createTestDatabase();
    const store = new PgSqlStore(db.url);
    const other = new Client({ connectionString: db.url });
    await other.connect();
    try {
      const r = rigFor(store);
      await other.query('BEGIN');
      await other.query(`SELECT pg_advisory_xact_lock(hashtext('routing-gateway:retention'))`);
      const skipped = await r.job.run();
      expect(skipped).toMatchObject({ outcome: 'skipped', partitions: { busy: true, created: [] } });
      await other.query('COMMIT');
      expect(await r.job.run()).toMatchObject({ outcome: 'done', partitions: { created: days(F, 8) } });
    } finally {
      await other.end();
      await store.close();
      await db.drop();
    }
  });

  it('gives up a step that would wait behind a long reader of decision_traces (lock_timeout), and does it on the next run', async () => {
    const db = await createTestDatabase();
    const store = new PgSqlStore(db.url);
    const reader = new Client({ connectionString: db.url });
    await reader.connect();
    try {
      const r = rigFor(store);
      // A reader in the middle of a long transaction holds ACCESS SHARE on the table until it ends.
      await reader.query('BEGIN');
      await reader.query('SELECT count(*) FROM decision_traces');
      const started = Date.now();
      expect(await r.job.run()).toMatchObject({ outcome: 'skipped', partitions: { busy: true, created: [] } });
      expect(Date.now() - started).toBeLessThan(10_000);
      // The step left no lock request queued behind the reader: writes go on beside it.
      await new DecisionTracesRepository(store).write([trace({ requestId: 'during' })]);
      await reader.query('COMMIT');
      expect(await r.job.run()).toMatchObject({ outcome: 'done', partitions: { created: days(F, 8) } });
    } finally {
      await reader.end();
      await store.close();
      await db.drop();
    }
  });
});
