import { makeConfig, memoryLogger, SwitchableSql } from '../../test/support/kit';
import { createTestPglite } from '../../test/support/pglite';
import type { AppLogger } from '../common/logging/logger';
import { MetricsService } from '../metrics/metrics.service';
import { StoreFallback } from '../resilience/store-fallback';
import { PgliteSqlStore } from '../stores/sql/pglite-sql.store';
import { AggregationJob } from './aggregation.job';
import { AggregationParams, ModelStatsRepository } from './model-stats.repository';
import { StatsSnapshotService } from './stats-snapshot.service';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One session of org acme served by mock/m with feedback `score`: n 1 and scoreMean score/10 once aggregated. */
async function seedSession(sql: PgliteSqlStore, session: string, score: number): Promise<void> {
  await sql.query(
    `INSERT INTO decision_traces (request_id, org_id, api_key_id, session_id, endpoint, requested_model, selected_provider, selected_model, status, latency_ms)
     VALUES ($1, 'acme', 'k', $2, 'chat', 'm', 'mock', 'm', 200, 10)`,
    [`req-${session}`, session],
  );
  await sql.query(
    `INSERT INTO feedback (org_id, session_id, score, useful) VALUES ('acme', $1, $2, true)
     ON CONFLICT (org_id, session_id) DO UPDATE SET score = EXCLUDED.score`,
    [session, score],
  );
}

describe('AggregationJob', () => {
  let pglite: PgliteSqlStore;
  let sql: SwitchableSql;
  let snapshot: StatsSnapshotService;
  let metrics: MetricsService;
  let logger: AppLogger;
  let lines: Record<string, unknown>[];
  let job: AggregationJob | undefined;

  function makeJob(yaml: string, logIntervalMs = 60_000, repo = new ModelStatsRepository(sql)): AggregationJob {
    job = new AggregationJob(repo, snapshot, makeConfig(yaml), metrics, new StoreFallback(metrics, logger), { logIntervalMs });
    return job;
  }

  beforeEach(async () => {
    pglite = await createTestPglite();
    sql = new SwitchableSql(pglite);
    snapshot = new StatsSnapshotService();
    metrics = new MetricsService();
    ({ logger, lines } = memoryLogger());
  });
  afterEach(async () => {
    await job?.beforeApplicationShutdown();
    job = undefined;
    await pglite.close();
  });

  it('recomputes the table and refreshes the snapshot in one run, with the configured window and weights', async () => {
    const j = makeJob('learning: { window_days: 1, weights: { score: 1, useful: 0 } }');
    await seedSession(pglite, 's1', 8);
    // Older than the one-day window: left out.
    await pglite.query(`UPDATE decision_traces SET created_at = now() - interval '2 days'`, []);
    await seedSession(pglite, 's2', 4);
    expect(await j.run()).toEqual({ aggregation: 'done', snapshot: 'refreshed' });
    const s = snapshot.get('acme', 'mock', 'm');
    expect(s).toMatchObject({ n: 1, requests: 1 });
    // Weights 1 / 0: the outcome is the score alone.
    expect(s!.outcomeMean).toBeCloseTo(0.4, 9);
    expect(snapshot.refreshedAt).toBeInstanceOf(Date);
    expect(await metrics.registry.getSingleMetricAsString('gateway_learning_aggregations_total')).toMatch(/outcome="done"} 1/);
  });

  it('loads the table at start-up, then runs on its beat until shutdown', async () => {
    const j = makeJob('learning: { refresh_seconds: 0.05 }');
    await seedSession(pglite, 's1', 10);
    await new ModelStatsRepository(pglite).recompute({ windowSeconds: 86_400, weights: { score: 0.6, useful: 0.4 } });
    await j.onApplicationBootstrap();
    // Loaded from the table before any beat.
    expect(snapshot.get('acme', 'mock', 'm')).toMatchObject({ n: 1 });
    await seedSession(pglite, 's2', 0);
    for (let i = 0; i < 100 && snapshot.get('acme', 'mock', 'm')?.n !== 2; i++) await sleep(20);
    expect(snapshot.get('acme', 'mock', 'm')).toMatchObject({ n: 2 });
    await j.beforeApplicationShutdown();
    const runs = sql.transactions;
    await sleep(200);
    expect(sql.transactions).toBe(runs);
  });

  it('spends at most 5 % of the time recomputing: after a slow recompute, beats only reload the snapshot', async () => {
    let recomputes = 0;
    let reloads = 0;
    class SlowRecompute extends ModelStatsRepository {
      override async recompute(params: AggregationParams) {
        recomputes++;
        await sleep(100); // a slow recompute: the next one is due 100 / 0.05 = 2,000 ms after this one started
        return super.recompute(params);
      }
      override async loadAll() {
        reloads++;
        return super.loadAll();
      }
    }
    const j = makeJob('learning: { refresh_seconds: 0.05 }', undefined, new SlowRecompute(sql));
    await j.onApplicationBootstrap();
    await seedSession(pglite, 's1', 10);
    await sleep(1_000);
    await j.beforeApplicationShutdown();
    expect(recomputes).toBe(1);
    // Beats kept the snapshot fresh meanwhile: the start-up load, the run's, and at least one
    // reload-only beat (how many more fit in the second depends on the machine's load, not on the rule).
    expect(reloads).toBeGreaterThanOrEqual(3);
    expect(snapshot.get('acme', 'mock', 'm')).toMatchObject({ n: 1 });
  });

  it('keeps the previous snapshot when the store fails, logs that once per interval, and recovers', async () => {
    const j = makeJob('learning: { refresh_seconds: 3600 }');
    await seedSession(pglite, 's1', 9);
    await j.run();
    const before = snapshot.get('acme', 'mock', 'm');
    const at = snapshot.refreshedAt;
    expect(before).toMatchObject({ n: 1 });

    sql.down = true;
    expect(await j.run()).toEqual({ aggregation: 'failed', snapshot: 'kept' });
    expect(await j.run()).toEqual({ aggregation: 'failed', snapshot: 'kept' });
    expect(snapshot.get('acme', 'mock', 'm')).toBe(before);
    expect(snapshot.refreshedAt).toBe(at);
    const warnings = lines.filter((l) => l.msg === 'degraded');
    // Two failed runs, each failing both steps: one line per kind of failure.
    expect(warnings.map((l) => l.topic).sort()).toEqual(['learning:aggregation', 'learning:snapshot']);
    expect(warnings.find((l) => l.topic === 'learning:snapshot')).toMatchObject({ effect: 'previous snapshot kept', refreshed_at: at!.toISOString() });
    expect(await metrics.registry.getSingleMetricAsString('gateway_learning_aggregations_total')).toMatch(/outcome="failed"} 2/);

    sql.down = false;
    await seedSession(pglite, 's2', 1);
    expect(await j.run()).toEqual({ aggregation: 'done', snapshot: 'refreshed' });
    expect(snapshot.get('acme', 'mock', 'm')).toMatchObject({ n: 2 });
  });

  it('starts with an empty snapshot when the store is down at start-up, without failing start-up', async () => {
    const j = makeJob('learning: { refresh_seconds: 3600 }');
    sql.down = true;
    await expect(j.onApplicationBootstrap()).resolves.toBeUndefined();
    expect(snapshot.refreshedAt).toBeNull();
    expect(snapshot.orgSamples('acme')).toBe(0);
  });

  it('never overlaps runs in one process: a call during a run waits for it, then runs again with what was written meanwhile', async () => {
    const j = makeJob('learning: { refresh_seconds: 3600 }');
    await seedSession(pglite, 's1', 5);
    sql.delayMs = 30;
    const first = j.run();
    await sleep(5);
    // Written while the first run is under way: the second call must include it.
    await seedSession(pglite, 's2', 5);
    const [a, b] = await Promise.all([first, j.run()]);
    expect([a.aggregation, b.aggregation]).toEqual(['done', 'done']);
    expect(sql.maxOpen).toBe(1);
    expect(sql.transactions).toBe(2);
    expect(snapshot.get('acme', 'mock', 'm')).toMatchObject({ n: 2 });
  });
});
