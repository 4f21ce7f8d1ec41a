import { makeConfig, silentLogger, SwitchableSql } from '../../../test/support/kit';
import { createTestPglite } from '../../../test/support/pglite';
import { MetricsService } from '../../metrics/metrics.service';
import { StoreFallback } from '../../resilience/store-fallback';
import { PgliteSqlStore } from '../../stores/sql/pglite-sql.store';
import { RegressionDetector } from './regression.detector';
import { RegressionsRepository } from './regressions.repository';
import { RegressionsService } from './regressions.service';
import { RegressionsSnapshotService } from './regressions-snapshot.service';

const DAY = 24 * 3600 * 1000;
const record = (orgId: string, model: string, createdAt: Date) => ({ orgId, provider: 'p', model, reason: 'quality_drop', createdAt });

describe('RegressionsSnapshotService (the in-memory 7-day view)', () => {
  const now = new Date('2025-01-10T12:00:00Z');

  it('answers per (org, provider, model), newest first, inside the 7 days up to now', () => {
    const view = new RegressionsSnapshotService();
    view.replace([
      record('acme', 'm', new Date(now.getTime() - 2 * DAY)),
      record('acme', 'm', new Date(now.getTime() - DAY)),
      record('acme', 'm', new Date(now.getTime() - 7 * DAY - 1)),
      record('acme', 'other', new Date(now.getTime() - DAY)),
      record('beta', 'm', new Date(now.getTime() - DAY)),
    ]);
    expect(view.recent('acme', 'p', 'm', now)).toEqual([new Date(now.getTime() - DAY), new Date(now.getTime() - 2 * DAY)]);
    expect(view.recent('acme', 'p', 'm', new Date(now.getTime() + 6 * DAY))).toEqual([new Date(now.getTime() - DAY)]);
    expect(view.recent('nobody', 'p', 'm', now)).toEqual([]);
  });

  it('adds a just-recorded regression, and a reload replaces the whole view', () => {
    const view = new RegressionsSnapshotService();
    view.add(record('acme', 'm', new Date(now.getTime() - DAY)));
    view.add(record('acme', 'm', new Date(now.getTime() - 3 * DAY)));
    expect(view.recent('acme', 'p', 'm', now)).toHaveLength(2);
    view.replace([]);
    expect(view.recent('acme', 'p', 'm', now)).toEqual([]);
  });
});

describe('regressions on the analytics store', () => {
  let sql: PgliteSqlStore;
  let repo: RegressionsRepository;
  let view: RegressionsSnapshotService;
  let metrics: MetricsService;
  const logger = silentLogger();
  const config = (yaml = '') => makeConfig(yaml);

  beforeEach(async () => {
    sql = await createTestPglite();
    repo = new RegressionsRepository(sql);
    metrics = new MetricsService();
    view = new RegressionsSnapshotService(repo, config(), new StoreFallback(metrics, logger));
  });
  afterEach(async () => {
    view.beforeApplicationShutdown();
    await sql.close();
  });

  it('records a regression (the experiments rollback path): a row, and this replica sees it at once', async () => {
    const service = new RegressionsService(repo, view);
    await service.record('acme', 'p', 'm', 'experiment_rolled_back', { experiment_id: 'e1' });
    const { rows } = await sql.query<{ reason: string; detail: unknown }>('SELECT reason, detail FROM regressions', []);
    expect(rows).toEqual([{ reason: 'experiment_rolled_back', detail: { experiment_id: 'e1' } }]);
    expect(view.recent('acme', 'p', 'm', new Date(Date.now() + 1000))).toHaveLength(1);
  });

  it('reloads the last 7 days from the table (older rows are left out)', async () => {
    await repo.insert('acme', 'p', 'm', 'quality_drop', null);
    await repo.insert('acme', 'p', 'old', 'quality_drop', null);
    await sql.query(`UPDATE regressions SET created_at = now() - interval '8 days' WHERE model = 'old'`, []);
    expect(await view.reload()).toBe(true);
    const later = new Date(Date.now() + 1000);
    expect(view.recent('acme', 'p', 'm', later)).toHaveLength(1);
    expect(view.recent('acme', 'p', 'old', later)).toHaveLength(0);
  });

  it('keeps the previous view when the store fails', async () => {
    await repo.insert('acme', 'p', 'm', 'quality_drop', null);
    await view.reload();
    await sql.close();
    expect(await view.reload()).toBe(false);
    expect(view.recent('acme', 'p', 'm', new Date(Date.now() + 1000))).toHaveLength(1);
    sql = await createTestPglite();
  });

  describe('quality-drop detector', () => {
    /** `count` sessions of `model` with feedback (score, useful) given `ago` ago, each served successfully. */
    async function seed(model: string, count: number, score: number, useful: boolean, ago: string): Promise<void> {
      for (let i = 0; i < count; i++) {
        const session = `${model}-${ago}-${i}`.replace(/\s/g, '');
        await sql.query(
          `INSERT INTO decision_traces (request_id, org_id, api_key_id, session_id, endpoint, requested_model, selected_provider, selected_model, status, latency_ms, created_at)
           VALUES ($1, 'acme', 'k', $1, 'chat', 'auto', 'p', $2, 200, 10, now() - $3::interval)`,
          [session, model, ago],
        );
        await sql.query(
          `INSERT INTO feedback (org_id, session_id, score, useful, created_at, updated_at) VALUES ('acme', $1, $2, $3, now() - $4::interval, now() - $4::interval)`,
          [session, score, useful, ago],
        );
      }
    }

    const detector = (yaml = '', m = new MetricsService()) => new RegressionDetector(repo, view, config(yaml), m, new StoreFallback(m, logger));

    it('records a drop of the rolling mean below the long-run mean by more than the margin, once per episode', async () => {
      // Long run: 30 sessions 3 days ago at y = .6 × .9 + .4 × 1 = .94; rolling (24 h): 20 at y = .6 × .3 + 0 = .18.
      // long-run mean = (30 × .94 + 20 × .18) / 50 = .636 > .18 + .1 → a quality_drop.
      await seed('m', 30, 9, true, '3 days');
      await seed('m', 20, 3, false, '2 hours');
      // A steady model: no drop.
      await seed('steady', 30, 8, true, '3 days');
      await seed('steady', 20, 8, true, '2 hours');
      const d = detector('', metrics);
      const found = await d.run();
      expect(found).toEqual([expect.objectContaining({ orgId: 'acme', provider: 'p', model: 'm', reason: 'quality_drop' })]);
      const { rows } = await sql.query<{ detail: Record<string, number> }>(`SELECT detail FROM regressions`, []);
      expect(rows[0].detail).toMatchObject({ rolling_n: 20, long_run_n: 50, margin: 0.1 });
      expect(rows[0].detail.rolling_mean).toBeCloseTo(0.18, 9);
      expect(rows[0].detail.long_run_mean).toBeCloseTo(0.636, 9);
      expect(view.recent('acme', 'p', 'm', new Date(Date.now() + 1000))).toHaveLength(1);
      // The same episode is not recorded again on the next beat.
      expect(await d.run()).toEqual([]);
      expect(await metrics.registry.getSingleMetricAsString('gateway_routing_regressions_detected_total')).toMatch(/ 1$/m);
    });

    it('needs min_samples in the rolling window and in the long run before it, and a drop beyond the margin', async () => {
      await seed('m', 30, 9, true, '3 days');
      await seed('m', 19, 3, false, '2 hours');
      expect(await detector().run()).toEqual([]);
      expect(await detector('routing: { regressions: { min_samples: 19 } }').run()).toHaveLength(1);
      await sql.query('DELETE FROM regressions', []);
      expect(await detector('routing: { regressions: { min_samples: 19, margin: 0.9 } }').run()).toEqual([]);
    });

    it('never overlaps detections in one process: a call during one waits for it, then detects again', async () => {
      await seed('m', 30, 9, true, '3 days');
      await seed('m', 20, 3, false, '2 hours');
      const slow = new SwitchableSql(sql);
      slow.delayMs = 30;
      const d = new RegressionDetector(new RegressionsRepository(slow), view, config(), metrics, new StoreFallback(metrics, logger));
      const first = d.run();
      const second = d.run();
      // The second call neither ran beside the first (on Postgres the advisory lock would have
      // answered it 'skipped') nor got the first one's answer: it ran after it, and found the episode recorded.
      expect(await first).toEqual([expect.objectContaining({ model: 'm', reason: 'quality_drop' })]);
      expect(await second).toEqual([]);
      expect([slow.transactions, slow.maxOpen]).toEqual([2, 1]);
    });

    it('runs on its beat (check_seconds) after bootstrap, and not after shutdown', async () => {
      const slow = new SwitchableSql(sql);
      const d = new RegressionDetector(new RegressionsRepository(slow), view, config('routing: { regressions: { check_seconds: 1 } }'), metrics, new StoreFallback(metrics, logger));
      d.onApplicationBootstrap();
      const started = Date.now();
      while (slow.transactions === 0 && Date.now() - started < 5_000) await new Promise((r) => setTimeout(r, 20));
      await d.beforeApplicationShutdown();
      expect(slow.transactions).toBe(1);
      expect(Date.now() - started).toBeGreaterThanOrEqual(900);
      await new Promise((r) => setTimeout(r, 1_200));
      expect(slow.transactions).toBe(1);
    });

    it('reports a store failure without throwing', async () => {
      await sql.close();
      expect(await detector().run()).toBe('failed');
      sql = await createTestPglite();
    });
  });
});
