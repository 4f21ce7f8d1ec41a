/**
 * Migration 0012 on an installation with traces (docs/operations.md "Admin API"): the migrator's
 * step builds each partition's request/session and error indexes concurrently, and the file attaches
 * them to the parent's instead of building them under the partitions' locks. Twice from two replicas
 * at once it does the work once; afterwards a new day's partition gets both indexes from the parent.
 */
import { Client } from 'pg';
import { ANALYTICS_MIGRATIONS, runMigrations } from '../../src/stores/sql/migrator';
import { PgSqlStore } from '../../src/stores/sql/pg-sql.store';
import { createTestDatabase } from '../support/postgres';
import { describeWithPostgres } from '../support/real-servers';
import { migrationsUpTo } from './decision-traces-by-day.contract';

const DAY_MS = 86_400_000;

describeWithPostgres('migration 0012 on a real Postgres with traces', () => {
  it("builds each partition's indexes before the file, which attaches them", async () => {
    const db = await createTestDatabase({ migrated: false });
    const stores = [new PgSqlStore(db.url), new PgSqlStore(db.url)];
    const old = migrationsUpTo(11);
    try {
      await runMigrations(stores[0], old.set);
      // Traces of today, tomorrow (their day partitions) and of last week (the default partition).
      for (const ageDays of [0, -1, 7]) {
        await stores[0].query(
          `INSERT INTO decision_traces (request_id, org_id, api_key_id, session_id, endpoint, requested_model, status, latency_ms, error_code, created_at)
           SELECT 'r-' || $1::text || '-' || g, 'acme', 'k', 's-' || (g / 4), 'chat', 'auto', CASE WHEN g % 10 = 0 THEN 502 ELSE 200 END, 10,
                  CASE WHEN g % 10 = 0 THEN 'upstream_error' END, now() - $1::float8 * interval '1 day'
           FROM generate_series(1, 500) g`,
          [ageDays],
        );
      }
      // Two replicas starting at once.
      await Promise.all(stores.map((s) => runMigrations(s, ANALYTICS_MIGRATIONS)));

      const { rows: parts } = await stores[0].query<{ partition: string }>(
        `SELECT c.relname AS partition FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'decision_traces'::regclass ORDER BY 1`,
        [],
      );
      expect(parts.length).toBeGreaterThan(3);
      for (const parent of ['decision_traces_request_session_idx', 'decision_traces_errors_idx']) {
        const { rows } = await stores[0].query<{ index: string; valid: boolean }>(
          `SELECT c.relname AS index, x.indisvalid AS valid FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_index x ON x.indexrelid = c.oid
            WHERE i.inhparent = $1::regclass ORDER BY 1`,
          [parent],
        );
        // Every partition's index is the one the step built (its name), attached and valid.
        const suffix = parent.replace('decision_traces_', '');
        expect(rows).toEqual(parts.map((p) => ({ index: `${p.partition}_${suffix}`, valid: true })));
      }
      // The old session index is gone, on every partition.
      const { rows: gone } = await stores[0].query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_indexes WHERE indexname LIKE '%org_id_session_id%' OR indexname LIKE '%org_session%'`, []);
      expect(gone[0].n).toBe(0);

      // A day made later gets both from the parent.
      const day = new Date(Date.now() + 30 * DAY_MS).toISOString().slice(0, 10);
      const next = new Date(Date.now() + 31 * DAY_MS).toISOString().slice(0, 10);
      await stores[0].query(`CREATE TABLE decision_traces_later PARTITION OF decision_traces FOR VALUES FROM ('${day} 00:00:00+00') TO ('${next} 00:00:00+00')`, []);
      const { rows: later } = await stores[0].query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
          WHERE i.inhparent IN ('decision_traces_request_session_idx'::regclass, 'decision_traces_errors_idx'::regclass) AND c.relname LIKE 'decision_traces_later%'`,
        [],
      );
      expect(later[0].n).toBe(2);
    } finally {
      old.cleanup();
      await Promise.all(stores.map((s) => s.close()));
      await db.drop();
    }
  }, 120_000);

  it("waits for another build on a partition before dropping a dead build's leftover there", async () => {
    const db = await createTestDatabase({ migrated: false });
    const store = new PgSqlStore(db.url);
    const [writer, builder] = [new Client({ connectionString: db.url }), new Client({ connectionString: db.url })];
    const old = migrationsUpTo(11);
    try {
      await runMigrations(store, old.set);
      await Promise.all([writer.connect(), builder.connect()]);
      await store.query(
        `INSERT INTO decision_traces (request_id, org_id, api_key_id, endpoint, requested_model, status, latency_ms, created_at)
         SELECT 'r-' || g, 'acme', 'k', 'chat', 'auto', 200, 10, now() FROM generate_series(1, 50) g`,
        [],
      );
      const { rows } = await store.query<{ partition: string }>(`SELECT tableoid::regclass::text AS partition FROM decision_traces LIMIT 1`, []);
      const partition = rows[0].partition;
      // What a dead build leaves: an invalid index under the name the step builds.
      await expect(store.query(`CREATE UNIQUE INDEX CONCURRENTLY ${partition}_request_session_idx ON ${partition} (org_id)`, [])).rejects.toThrow(/duplicate|unique/i);
      // Another process's build on the same partition, held in its first phase by an open insert.
      await writer.query('BEGIN');
      await writer.query(`INSERT INTO decision_traces (request_id, org_id, api_key_id, endpoint, requested_model, status, latency_ms, created_at) VALUES ('w', 'acme', 'k', 'chat', 'auto', 200, 10, now())`);
      const build = builder.query(`CREATE INDEX CONCURRENTLY other_build_idx ON ${partition} (latency_ms)`);
      while ((await store.query(`SELECT 1 FROM pg_stat_progress_create_index`, [])).rows.length === 0) await new Promise((r) => setTimeout(r, 50));

      let settled: string | null = null;
      const migrating = runMigrations(store, ANALYTICS_MIGRATIONS).then(
        () => (settled = 'done'),
        (err: Error) => (settled = err.message),
      );
      // Longer than the drop's lock_timeout: a drop that queued behind the build would have failed by now.
      await new Promise((r) => setTimeout(r, 6_500));
      expect(settled).toBeNull();
      const { rows: left } = await store.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_class WHERE relname = $1`, [`${partition}_request_session_idx`]);
      expect(left[0].n).toBe(1);

      await writer.query('COMMIT');
      await build;
      await migrating;
      expect(settled).toBe('done');
      const { rows: attached } = await store.query<{ valid: boolean; def: string }>(
        `SELECT x.indisvalid AS valid, pg_get_indexdef(x.indexrelid) AS def FROM pg_index x WHERE x.indexrelid = to_regclass($1)`,
        [`${partition}_request_session_idx`],
      );
      expect(attached).toEqual([{ valid: true, def: expect.stringContaining('USING brin') }]);
    } finally {
      old.cleanup();
      await Promise.all([writer.end(), builder.end(), store.close()]);
      await db.drop();
    }
  }, 120_000);
});
