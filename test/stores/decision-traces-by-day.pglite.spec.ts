import { ANALYTICS_MIGRATIONS, runMigrations } from '../../src/stores/sql/migrator';
import { createTestPglite } from '../support/pglite';
import { bounds, decisionTracesByDayContract, expectUtcMidnightSplit, partitions, utcDay } from './decision-traces-by-day.contract';

decisionTracesByDayContract('PGlite', async () => {
  const store = await createTestPglite({ migrated: false });
  return { store, cleanup: () => store.close() };
}, 20_000);

describe('migration 0005 in a session whose time zone is not UTC', () => {
  it('still bounds the days at 00:00 UTC (PGlite is one session, so its time zone can be set for the whole run)', async () => {
    const store = await createTestPglite({ migrated: false });
    try {
      await store.query(`SET TimeZone = 'Pacific/Kiritimati'`, []);
      await runMigrations(store, ANALYTICS_MIGRATIONS);
      const today = Date.now();
      // 14 hours ahead of UTC, "today" there is often tomorrow in UTC: the names and bounds are UTC days still.
      expect((await partitions(store)).map((p) => p.name)).toContain(`decision_traces_p${utcDay(today)}`);
      const day = new Date(today + 86_400_000).toISOString().slice(0, 10);
      const next = new Date(today + 2 * 86_400_000).toISOString().slice(0, 10);
      expect(await bounds(store, `decision_traces_p${utcDay(today + 86_400_000)}`)).toBe(`FOR VALUES FROM ('${day} 00:00:00+00') TO ('${next} 00:00:00+00')`);
      await expectUtcMidnightSplit(store, today + 86_400_000);
    } finally {
      await store.close();
    }
  });
});
