import pino from 'pino';
import { createTestPglite } from '../../test/support/pglite';
import { SwitchableSql } from '../../test/support/switchable-sql';
import { GatewayError } from '../common/errors/gateway-error';
import type { Caller } from '../common/http/request-context';
import { DtoPipe } from '../common/http/validated-body';
import { AppConfig } from '../config/app-config';
import { loadEnv } from '../config/env';
import { loadGatewayConfig } from '../config/gateway-config';
import { LimitsService } from '../limits/limits.service';
import { MonthlyUsageRepository } from '../limits/monthly-usage.repository';
import { MetricsService } from '../metrics/metrics.service';
import { MemoryCacheStore } from '../stores/cache/memory-cache.store';
import { PgliteSqlStore } from '../stores/sql/pglite-sql.store';
import { SubmitFeedbackDto } from './dto/submit-feedback.dto';
import { FeedbackRepository } from './feedback.repository';
import { FeedbackService } from './feedback.service';

const caller: Caller = {
  orgId: 'acme',
  keyId: 'acme-rw',
  plan: 'pro',
  features: [],
  permissions: ['read', 'write'],
  killSwitches: [],
  monthlyRequestLimit: null,
};

const dto = (over: Partial<SubmitFeedbackDto> = {}): SubmitFeedbackDto => Object.assign(new SubmitFeedbackDto(), { session_id: 's-1', score: 8, useful: true }, over);

describe('FeedbackService', () => {
  let pglite: PgliteSqlStore;
  let sql: SwitchableSql;
  let limits: LimitsService;
  let metrics: MetricsService;
  let lines: Record<string, unknown>[];
  let service: FeedbackService;

  beforeEach(async () => {
    pglite = await createTestPglite();
    sql = new SwitchableSql(pglite);
    metrics = new MetricsService();
    lines = [];
    const logger = { pino: pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s)) }) };
    const config = new AppConfig(loadEnv({}), loadGatewayConfig('limits: { requests_per_minute_per_key: 3 }', {}));
    limits = new LimitsService(new MemoryCacheStore(), new MonthlyUsageRepository(sql), metrics, logger, config);
    service = new FeedbackService(new FeedbackRepository(sql), limits, metrics, logger);
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

  it('turns a store failure into 503 internal without internals, counted, and logged once per interval', async () => {
    sql.down = true;
    for (let i = 0; i < 2; i++) {
      const err = await service.submit(caller, dto()).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(GatewayError);
      expect(err).toMatchObject({ code: 'internal', status: 503 });
      expect((err as GatewayError).toBody().error.message).not.toMatch(/ECONNREFUSED|5432/);
    }
    expect(lines.filter((l) => l.topic === 'analytics-store:feedback')).toHaveLength(1);
    expect(await metrics.registry.getSingleMetricAsString('gateway_store_errors_total')).toMatch(/store="analytics"} 2/);
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
