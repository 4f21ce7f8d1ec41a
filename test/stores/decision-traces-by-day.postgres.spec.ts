import { ANALYTICS_MIGRATIONS, runMigrations } from '../../src/stores/sql/migrator';
import { PgSqlStore } from '../../src/stores/sql/pg-sql.store';
import { DecisionTracesRepository } from '../../src/traces/decision-traces.repository';
import { createTestDatabase } from '../support/postgres';
import { describeWithPostgres } from '../support/real-servers';
import { decisionTracesByDayContract, fingerprint, migrationsUpTo, partitions, populateOldTable, trace } from './decision-traces-by-day.contract';

describeWithPostgres('decision traces by UTC day on a real Postgres', () => {
  decisionTracesByDayContract('Postgres', async () => {
    const db = await createTestDatabase({ migrated: false });
    // One connection, as the migrator's own store has (sql-store.factory.ts).
    const store = new PgSqlStore(db.url, { max: 1, statementTimeoutMs: 120_000 });
    return {
      store,
      cleanup: async () => {
        await store.close();
        await db.drop();
      },
    };
  }, 20_000);

  it('loses no trace written while replicas migrate: old-version inserts (no id) and new ones go on throughout', async () => {
    const db = await createTestDatabase({ migrated: false });
    const migrators = [0, 1].map(() => new PgSqlStore(db.url, { max: 1, statementTimeoutMs: 120_000 }));
    const writer = new PgSqlStore(db.url, { max: 4 });
    const old = migrationsUpTo(4);
    try {
      await runMigrations(migrators[0], old.set);
      await populateOldTable(writer, 100_000);
      const before = (await fingerprint(writer)).n as number;
      let stop = false;
      let oldWrites = 0;
      let newWrites = 0;
      let slowest = 0;
      const failures: unknown[] = [];
      // A replica on the previous version: one row per statement, no id, no ON CONFLICT.
      const oldReplica = (async () => {
        while (!stop) {
          const started = Date.now();
          await writer
            .query(`INSERT INTO decision_traces (request_id, org_id, api_key_id, endpoint, requested_model, status, latency_ms) VALUES ($1, 'acme', 'k', 'chat', 'auto', 200, 1)`, [`old-${oldWrites}`])
            .then(() => oldWrites++, (err: unknown) => failures.push(err));
          slowest = Math.max(slowest, Date.now() - started);
        }
      })();
      // A replica on this version, writing batches through the repository once the new table is there.
      const repo = new DecisionTracesRepository(writer);
      const newReplica = (async () => {
        while (!stop) {
          const batch = [trace(), trace()];
          await repo.write(batch).then(() => (newWrites += batch.length), () => undefined);
          await new Promise((r) => setTimeout(r, 5));
        }
      })();
      // Two replicas starting together.
      await Promise.all(migrators.map((m) => runMigrations(m, ANALYTICS_MIGRATIONS)));
      await new Promise((r) => setTimeout(r, 200));
      stop = true;
      await Promise.all([oldReplica, newReplica]);

      expect(failures).toEqual([]);
      expect(oldWrites).toBeGreaterThan(0);
      const after = (await fingerprint(writer)).n as number;
      // Every old-version row, and every new batch the store acknowledged (a batch that failed before the new table existed is not counted).
      expect(after).toBeGreaterThanOrEqual(before + oldWrites + newWrites);
      const { rows } = await writer.query<{ n: number }>(`SELECT count(*)::int AS n FROM decision_traces WHERE request_id LIKE 'old-%'`, []);
      expect(rows[0].n).toBe(oldWrites);
      expect((await partitions(writer)).some((p) => /^decision_traces_before_\d{8}$/.test(p.name))).toBe(true);
      // Inserts were never held for long (the scan and the index build ran beside them).
      expect(slowest).toBeLessThan(5_000);
    } finally {
      old.cleanup();
      await Promise.all([...migrators, writer].map((s) => s.close()));
      await db.drop();
    }
  });
});
