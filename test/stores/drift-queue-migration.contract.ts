/**
 * Migration 0015 on an existing installation (README "Drift: change detection"): the change
 * detector's samples still waiting (rollup_session_pairs rows with an answer, not `drift_fed`) move to
 * its queue and are marked, so the next step feeds exactly them; a pair without an answer yet stays
 * unfed, to be queued when its answer comes. An old database is migrated to 0014, given its pairs,
 * and migrated to the current schema.
 */
import { ANALYTICS_MIGRATIONS, runMigrations } from '../../src/stores/sql/migrator';
import type { MigrationStoreHandle } from './admin-permission-migration.contract';
import { migrationsUpTo } from './decision-traces-by-day.contract';

export function driftQueueMigrationContract(name: string, open: () => Promise<MigrationStoreHandle>): void {
  describe(`migration 0015 queues the change detector's waiting samples (${name})`, () => {
    it('waiting samples move to the queue, marked; fed ones and pairs without an answer stay as they were', async () => {
      const h = await open();
      const old = migrationsUpTo(14);
      try {
        await runMigrations(h.store, old.set);
        await h.store.query(
          `INSERT INTO rollup_session_pairs (org_id, session_id, provider, model, last_trace_at, score, useful, bucket, feedback_bucket, drift_fed)
           VALUES ('acme', 'waiting', 'p', 'm', '2026-11-20T10:00:00Z', 7, true, '2026-11-20T10:00:00Z', '2026-11-20T10:00:00Z', false),
                  ('acme', 'fed', 'p', 'm', '2026-11-20T09:00:00Z', 3, false, '2026-11-20T09:00:00Z', '2026-11-20T09:00:00Z', true),
                  ('acme', 'no-answer', 'p', 'm', '2026-11-20T11:00:00Z', NULL, NULL, NULL, NULL, false)`,
          [],
        );
        const applied = await runMigrations(h.store, ANALYTICS_MIGRATIONS);
        expect(applied.map((m) => m.version)).toContain(15);

        const queue = await h.store.query<{ session_id: string; last_trace_at: Date | string }>(`SELECT session_id, last_trace_at FROM drift_queue`, []);
        expect(queue.rows.map((r) => [r.session_id, new Date(r.last_trace_at).toISOString()])).toEqual([['waiting', '2026-11-20T10:00:00.000Z']]);
        const pairs = await h.store.query<{ session_id: string; drift_fed: boolean }>(`SELECT session_id, drift_fed FROM rollup_session_pairs ORDER BY session_id`, []);
        expect(pairs.rows).toEqual([
          { session_id: 'fed', drift_fed: true },
          { session_id: 'no-answer', drift_fed: false },
          { session_id: 'waiting', drift_fed: true },
        ]);
        const index = await h.store.query(`SELECT 1 FROM pg_indexes WHERE indexname = 'rollup_session_pairs_unfed_idx'`, []);
        expect(index.rows).toEqual([]);
      } finally {
        old.cleanup();
        await h.cleanup();
      }
    });
  });
}
