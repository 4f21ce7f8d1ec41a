/**
 * Migration 0012 on an installation with traces (docs/operations.md "Admin API"): the migrator's
 * step builds each partition's request/session and error indexes concurrently, and the file attaches
 * them to the parent's instead of building them under the partitions' locks. Twice from two replicas
 * at once it does the work once; afterwards a new day's partition gets both indexes from the parent.
 */
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
});
