import { makeCaller, makeConfig, ManualClock, memoryLogger, SwitchableSql } from '../../test/support/kit';
import { createTestPglite } from '../../test/support/pglite';
import { GatewayError } from '../common/errors/gateway-error';
import type { Caller } from '../common/http/request-context';
import { DtoPipe } from '../common/http/validated-body';
import { LimitsService } from '../limits/limits.service';
import { MonthlyUsageRepository } from '../limits/monthly-usage.repository';
import { MetricsService } from '../metrics/metrics.service';
import { StoreFallback } from '../resilience/store-fallback';
import { MemoryCacheStore } from '../stores/cache/memory-cache.store';
import { PgliteSqlStore } from '../stores/sql/pglite-sql.store';
import { SubmitFeedbackDto } from './dto/submit-feedback.dto';
import { FeedbackRepository } from './feedback.repository';
import { FeedbackOptions, FeedbackService } from './feedback.service';

const caller = makeCaller({ features: [] });

const dto = (over: Partial<SubmitFeedbackDto> = {}): SubmitFeedbackDto => Object.assign(new SubmitFeedbackDto(), { session_id: 's-1', score: 8, useful: true }, over);

describe('FeedbackService', () => {
  let pglite: PgliteSqlStore;
  let sql: SwitchableSql;
  let limits: LimitsService;
  let metrics: MetricsService;
  let lines: Record<string, unknown>[];
  let service: FeedbackService;
  let clock: ManualClock;

  beforeEach(async () => {
    pglite = await createTestPglite();
    sql = new SwitchableSql(pglite);
    metrics = new MetricsService();
    const { logger, lines: logged } = memoryLogger();
    lines = logged;
    const config = makeConfig('limits: { requests_per_minute_per_key: 3 }');
    const fallback = new StoreFallback(metrics, logger);
    limits = new LimitsService(new MemoryCacheStore(), new MonthlyUsageRepository(sql), metrics, logger, fallback, config);
    clock = new ManualClock(Date.parse('2026-03-01T12:00:00Z'));
    const options: FeedbackOptions = { maxHeld: 3, retryIntervalMs: 60_000, shutdownWaitMs: 2_000, now: clock.now };
    service = new FeedbackService(new FeedbackRepository(sql), limits, metrics, logger, fallback, options);
  });
  afterEach(async () => {
    await limits.beforeApplicationShutdown();
    await pglite.close();
  });

  const stored = async () =>
    (await pglite.query<{ org_id: string; session_id: string; score: number; useful: boolean }>('SELECT org_id, session_id, score, useful FROM feedback', [])).rows;

  it('upserts the answer under the caller’s organisation and returns {}', async () => {
    await expect(service.submit(caller, dto())).resolves.toEqual({});
    await expect(service.submit(caller, dto({ score: 2, useful: false }))).resolves.toEqual({});
    expect(await stored()).toEqual([{ org_id: 'acme', session_id: 's-1', score: 2, useful: false }]);
  });

  // Each call from its own key: these cases are about the store, not the key's rate limit of 3 a minute.
  let keys = 0;
  const fresh = (): Caller => ({ ...caller, keyId: `k-${++keys}` });
  const storedAt = async () =>
    (
      await pglite.query<{ session_id: string; score: number; created_at: Date; updated_at: Date }>(
        'SELECT session_id, score, created_at, updated_at FROM feedback ORDER BY session_id',
        [],
      )
    ).rows.map((r) => ({ session_id: r.session_id, score: r.score, created_at: r.created_at.toISOString(), updated_at: r.updated_at.toISOString() }));
  const heldGauge = async () => (await metrics.registry.getSingleMetric('gateway_feedback_held')!.get()).values[0]?.value;

  it('holds answers while the store is down (latest per session), answers {}, and writes them with the time they were given once it is back', async () => {
    sql.down = true;
    await expect(service.submit(fresh(), dto({ score: 1 }))).resolves.toEqual({});
    clock.t += 1_000;
    await expect(service.submit(fresh(), dto({ session_id: 's-2', score: 5 }))).resolves.toEqual({});
    clock.t += 1_000;
    await expect(service.submit(fresh(), dto({ score: 9 }))).resolves.toEqual({});
    expect(await heldGauge()).toBe(2);
    // Only the first answer tried the store: the next ones joined the held ones instead of waiting on it.
    expect(sql.queries).toBe(1);
    expect(lines.filter((l) => l.topic === 'analytics-store:feedback')).toHaveLength(1);
    await service.writeHeld();
    expect(await heldGauge()).toBe(2);

    sql.down = false;
    await service.writeHeld();
    expect(await heldGauge()).toBe(0);
    expect(await storedAt()).toEqual([
      { session_id: 's-1', score: 9, created_at: '2026-03-01T12:00:02.000Z', updated_at: '2026-03-01T12:00:02.000Z' },
      { session_id: 's-2', score: 5, created_at: '2026-03-01T12:00:01.000Z', updated_at: '2026-03-01T12:00:01.000Z' },
    ]);
    // Back to writing each answer at once.
    await service.submit(fresh(), dto({ session_id: 's-3' }));
    expect((await stored()).map((r) => r.session_id)).toContain('s-3');
  });

  it('never lets a held answer overwrite a later one stored meanwhile (another replica)', async () => {
    sql.down = true;
    await service.submit(fresh(), dto({ score: 1 }));
    sql.down = false;
    // Stored by another replica after the held answer was given (the database's clock: now, later than the held one's).
    await new FeedbackRepository(pglite).upsert({ orgId: 'acme', sessionId: 's-1', score: 7, useful: false });
    await service.writeHeld();
    expect(await stored()).toEqual([{ org_id: 'acme', session_id: 's-1', score: 7, useful: false }]);
  });

  it('refuses with 503 internal, without internals, only when the buffer is full; a held session may still change', async () => {
    sql.down = true;
    for (const s of ['a', 'b', 'c']) await service.submit(fresh(), dto({ session_id: s }));
    const err = await service.submit(fresh(), dto({ session_id: 'd' })).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect(err).toMatchObject({ code: 'internal', status: 503 });
    expect((err as GatewayError).toBody().error.message).not.toMatch(/ECONNREFUSED|5432/);
    await expect(service.submit(fresh(), dto({ session_id: 'b', score: 0 }))).resolves.toEqual({});
  });

  it('writes held answers at shutdown', async () => {
    sql.down = true;
    await service.submit(fresh(), dto());
    sql.down = false;
    await service.beforeApplicationShutdown();
    expect(await stored()).toEqual([{ org_id: 'acme', session_id: 's-1', score: 8, useful: true }]);
  });

  it('spends the key’s rate limit before writing: a refused call stores nothing', async () => {
    for (let i = 0; i < 3; i++) await service.submit(caller, dto({ session_id: `s-${i}` }));
    const queries = sql.queries;
    await expect(service.submit(caller, dto({ session_id: 's-late' }))).rejects.toMatchObject({ code: 'rate_limited', status: 429 });
    expect(sql.queries).toBe(queries);
    expect((await stored()).map((r) => r.session_id).sort()).toEqual(['s-0', 's-1', 's-2']);
  });
});

describe('SubmitFeedbackDto', () => {
  const pipe = new DtoPipe('invalid_request', SubmitFeedbackDto);
  const errorOf = (body: unknown) => {
    try {
      pipe.transform(body, { type: 'body' });
    } catch (err) {
      return (err as GatewayError).toBody().error;
    }
    throw new Error('expected a GatewayError');
  };

  it('reports the type of a field before its range, and an unknown key before the fields', () => {
    expect(errorOf({ session_id: 's', score: '7', useful: true })).toMatchObject({ param: 'score', message: 'score must be an integer from 0 to 10' });
    expect(errorOf({ session_id: 's', score: 11, useful: true })).toMatchObject({ param: 'score', message: 'score must not be greater than 10' });
    expect(errorOf({ extra: 1, score: 11 })).toMatchObject({ param: 'extra', message: 'unknown field "extra"' });
    expect(errorOf({ session_id: 'a b', score: 1, useful: true })).toMatchObject({ param: 'session_id', message: 'session_id must be 1 to 128 characters of A-Z a-z 0-9 . _ : -' });
  });
});
