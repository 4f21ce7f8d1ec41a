import { randomUUID } from 'node:crypto';
import { makeCaller as kitCaller, makeConfig, makeExperiment, ManualClock, rejectedWith, silentLogger, SwitchableCache, UnusedSql } from '../../test/support/kit';
import { GatewayError } from '../common/errors/gateway-error';
import type { Caller } from '../common/http/request-context';
import { LimitsService } from '../limits/limits.service';
import { MonthlyUsageRepository } from '../limits/monthly-usage.repository';
import { MetricsService } from '../metrics/metrics.service';
import { StoreFallback } from '../resilience/store-fallback';
import { CacheStore } from '../stores/cache/cache-store';
import { MemoryCacheStore } from '../stores/cache/memory-cache.store';
import type { SqlExecutor } from '../stores/sql/sql-store';
import type { CreateExperimentDto } from './dto/create-experiment.dto';
import { toExperimentJson } from './experiment.mapper';
import type { ExperimentEvent, ExperimentRecord, NewExperiment } from './experiment.record';
import { ExperimentRegressionSink } from './experiment-regression.sink';
import { ExperimentsRepository } from './experiments.repository';
import { ExperimentsService } from './experiments.service';

/** In-memory twin of ExperimentsRepository: same answers, transactions undone when they throw; no SQL is reached. */
class InMemoryExperimentsRepository extends ExperimentsRepository {
  rows: ExperimentRecord[] = [];
  events: ExperimentEvent[] = [];
  /** Set to make every call fail as a dead store would. */
  down = false;
  private readonly tx: SqlExecutor = { query: () => Promise.reject(new Error('the fake has no SQL')) };

  constructor(private readonly now: () => number) {
    super(new UnusedSql());
  }

  override async transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    this.check();
    const rows = this.rows.map((r) => ({ ...r }));
    const events = [...this.events];
    try {
      return await fn(this.tx);
    } catch (err) {
      this.rows = rows;
      this.events = events;
      throw err;
    }
  }

  override async listForOrg(orgId: string): Promise<ExperimentRecord[]> {
    this.check();
    return this.rows.filter((r) => r.orgId === orgId).reverse().map((r) => ({ ...r }));
  }

  override async listActiveForOrg(orgId: string): Promise<ExperimentRecord[]> {
    this.check();
    return this.rows.filter((r) => r.orgId === orgId && r.status === 'active').map((r) => ({ ...r }));
  }

  override async listActive(): Promise<ExperimentRecord[]> {
    this.check();
    return this.rows.filter((r) => r.status === 'active').map((r) => ({ ...r }));
  }

  override async lockForOrg(orgId: string, id: string): Promise<ExperimentRecord | null> {
    return this.copy(this.rows.find((r) => r.id === id && r.orgId === orgId));
  }

  override async lockById(id: string): Promise<ExperimentRecord | null> {
    return this.copy(this.rows.find((r) => r.id === id));
  }

  override async insertActive(e: NewExperiment): Promise<ExperimentRecord | null> {
    const same = (a: { provider: string; model: string }, b: { provider: string; model: string }) => a.provider === b.provider && a.model === b.model;
    if (this.rows.some((r) => r.orgId === e.orgId && r.status === 'active' && same(r.baseline, e.baseline) && same(r.candidate, e.candidate))) return null;
    const now = new Date(this.now());
    const row: ExperimentRecord = { id: randomUUID(), ...e, status: 'active', summary: null, startedAt: now, endedAt: null, createdAt: now };
    this.rows.push(row);
    return { ...row };
  }

  override async end(id: string, status: 'completed' | 'rolled_back', summary: Record<string, unknown> | null): Promise<ExperimentRecord | null> {
    const row = this.rows.find((r) => r.id === id && (r.status === 'draft' || r.status === 'active'));
    if (!row) return null;
    Object.assign(row, { status, endedAt: new Date(this.now()), summary: summary ?? row.summary });
    return { ...row };
  }

  override async insertEvent(e: ExperimentEvent): Promise<void> {
    this.events.push(e);
  }

  override async lockAndCountCreates(orgId: string, windowMs: number): Promise<{ count: number; retryAfterMs: number }> {
    const inWindow = this.rows.filter((r) => r.orgId === orgId && r.createdAt.getTime() > this.now() - windowMs);
    const oldest = Math.min(...inWindow.map((r) => r.createdAt.getTime()));
    return { count: inWindow.length, retryAfterMs: inWindow.length ? oldest + windowMs - this.now() : 0 };
  }

  private copy(row: ExperimentRecord | undefined): ExperimentRecord | null {
    return row ? { ...row } : null;
  }

  private check(): void {
    if (this.down) throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
  }
}

/** A cache store whose every call fails (Redis down). */
const deadCache = (): SwitchableCache => Object.assign(new SwitchableCache(), { down: true });

/** The regressions a rollback recorded, in order; `failing` makes every record reject. */
class RecordingRegressionSink extends ExperimentRegressionSink {
  rows: Array<{ orgId: string; provider: string; model: string; reason: string; detail: Record<string, unknown> }> = [];
  failing = false;
  async record(orgId: string, provider: string, model: string, reason: string, detail: Record<string, unknown>): Promise<void> {
    if (this.failing) throw new Error('regressions store down');
    this.rows.push({ orgId, provider, model, reason, detail });
  }
}

const YAML = `
providers:
  mock: { family: mock }
  alt: { family: mock }
models:
  fast: { provider: mock, type: chat }
  smart: { provider: mock, type: chat }
  both: { type: chat, providers: { mock: {}, alt: {} } }
  embed: { provider: mock, type: embedding }
limits: { experiment_creates_per_hour: 3 }
`;

const makeCaller = (overrides: Partial<Caller> = {}): Caller => kitCaller({ features: ['has_test_ab'], ...overrides });

function makeDto(overrides: Partial<Record<keyof CreateExperimentDto, unknown>> = {}): CreateExperimentDto {
  return {
    type: 'canary',
    baseline: { provider: 'mock', model: 'fast' },
    candidate: { provider: 'mock', model: 'smart' },
    traffic_pct: 10,
    ...overrides,
  } as CreateExperimentDto;
}

function setup(opts: { cache?: CacheStore; yaml?: string; activeCacheTtlMs?: number } = {}) {
  const clock = new ManualClock(Date.UTC(2025, 0, 15, 12, 0, 0));
  const now = clock.now;
  const repo = new InMemoryExperimentsRepository(now);
  const cache = opts.cache ?? new MemoryCacheStore({ now });
  const config = makeConfig(opts.yaml ?? YAML, { GATEWAY_DATA_DIR: '/tmp/unused' });
  const regressions = new RecordingRegressionSink();
  /** Another service over the same stores: a second replica (with its own limits service, as every replica has). */
  const replica = () => {
    const metrics = new MetricsService();
    const logger = silentLogger();
    const fallback = new StoreFallback(metrics, logger);
    const limits = new LimitsService(cache, new MonthlyUsageRepository(new UnusedSql()), metrics, logger, fallback, config, { now });
    return new ExperimentsService(
      repo,
      cache,
      config,
      limits,
      fallback,
      { now, activeCacheTtlMs: opts.activeCacheTtlMs },
      regressions,
    );
  };
  return { service: replica(), replica, repo, regressions, advance: (ms: number) => clock.advance(ms) };
}

const failure = (p: Promise<unknown>): Promise<GatewayError> => rejectedWith(p, GatewayError);

describe('ExperimentsService.create', () => {
  it('stores an active experiment with the stop-rule defaults and writes created then started with the actor', async () => {
    const { service, repo } = setup();
    const r = await service.create(makeCaller(), makeDto());
    expect(r).toMatchObject({ status: 'active', orgId: 'acme', trafficPct: 10, stopRule: { minN: 100, maxRegression: 0.05 }, createdByKeyId: 'acme-rw', endedAt: null });
    expect(repo.events.map((e) => [e.kind, e.actorApiKeyId])).toEqual([
      ['created', 'acme-rw'],
      ['started', 'acme-rw'],
    ]);
    const given = await service.create(makeCaller(), makeDto({ candidate: { provider: 'mock', model: 'both' }, stop_rule: { min_n: 7, max_regression: 0 } }));
    expect(given.stopRule).toEqual({ minN: 7, maxRegression: 0 });
  });

  it.each([
    [{ baseline: { provider: 'opnai', model: 'fast' } }, 'baseline.provider', 'unknown provider "opnai"'],
    [{ baseline: { provider: 'hasOwnProperty', model: 'fast' } }, 'baseline.provider', 'unknown provider'],
    [{ candidate: { provider: 'mock', model: 'gpt-x' } }, 'candidate.model', 'unknown model "gpt-x"'],
    [{ candidate: { provider: 'mock', model: '__proto__' } }, 'candidate.model', 'unknown model'],
    [{ candidate: { provider: 'alt', model: 'smart' } }, 'candidate.model', 'not served by provider "alt"'],
    [{ candidate: { provider: 'mock', model: 'embed' } }, 'candidate.model', 'not a chat model'],
    [{ candidate: { provider: 'mock', model: 'fast' } }, 'candidate', 'must differ'],
  ])('invalid_body %j → param %s', async (overrides, param, message) => {
    const { service, repo } = setup();
    // traffic_pct is out of range too: every invalid_body rule is checked before it.
    const err = await failure(service.create(makeCaller(), makeDto({ ...overrides, traffic_pct: 500 })));
    expect([err.code, err.param]).toEqual(['invalid_body', param]);
    expect(err.message).toContain(message);
    expect(repo.rows).toHaveLength(0);
  });

  it.each([-1, 100.5, -Infinity, Infinity])('invalid_traffic_pct for %p; 0, -0 and 100 pass', async (pct) => {
    const { service } = setup({ yaml: YAML.replace('experiment_creates_per_hour: 3', 'experiment_creates_per_hour: 100') });
    const err = await failure(service.create(makeCaller(), makeDto({ traffic_pct: pct })));
    expect([err.code, err.param, err.status]).toEqual(['invalid_traffic_pct', 'traffic_pct', 400]);
    expect((await service.create(makeCaller(), makeDto({ traffic_pct: 0 }))).trafficPct).toBe(0);
    expect(Object.is((await service.create(makeCaller(), makeDto({ traffic_pct: -0, candidate: { provider: 'mock', model: 'both' } }))).trafficPct, 0)).toBe(true);
    expect((await service.create(makeCaller(), makeDto({ traffic_pct: 100, baseline: { provider: 'mock', model: 'smart' }, candidate: { provider: 'mock', model: 'fast' } }))).trafficPct).toBe(100);
  });

  it('409 active_already_exists for the same pair while it is active; nothing written; free again after a rollback', async () => {
    const { service, repo } = setup();
    const first = await service.create(makeCaller(), makeDto());
    const err = await failure(service.create(makeCaller(), makeDto({ type: 'shadow' })));
    expect([err.code, err.status]).toEqual(['active_already_exists', 409]);
    expect([repo.rows.length, repo.events.length]).toEqual([1, 2]);
    await service.rollback(makeCaller(), first.id);
    expect((await service.create(makeCaller(), makeDto())).status).toBe('active');
  });

  it('budget: limit per organisation per hour, 429 with Retry-After, spent by 409s, not by 400s, freed as the window slides', async () => {
    const { service, advance } = setup();
    await failure(service.create(makeCaller(), makeDto({ traffic_pct: 101 })));
    await service.create(makeCaller(), makeDto());
    advance(60_000);
    expect((await failure(service.create(makeCaller(), makeDto()))).code).toBe('active_already_exists');
    await service.create(makeCaller(), makeDto({ candidate: { provider: 'mock', model: 'both' } }));
    const over = await failure(service.create(makeCaller(), makeDto({ baseline: { provider: 'mock', model: 'smart' }, candidate: { provider: 'mock', model: 'fast' } })));
    expect([over.code, over.status, over.headers]).toEqual(['rate_limited', 429, { 'Retry-After': '3540' }]);
    // Over budget, the duplicate pair is 429, not 409.
    expect((await failure(service.create(makeCaller(), makeDto()))).code).toBe('rate_limited');
    // Another organisation has its own budget.
    expect((await service.create(makeCaller({ orgId: 'other', keyId: 'other-rw' }), makeDto())).orgId).toBe('other');
    advance(3_540_001);
    expect((await service.create(makeCaller(), makeDto({ baseline: { provider: 'mock', model: 'smart' }, candidate: { provider: 'mock', model: 'fast' } }))).status).toBe('active');
  });

  it('cache store down: the budget is counted from the analytics store, with its Retry-After', async () => {
    const { service, repo, advance } = setup({ cache: deadCache() });
    await service.create(makeCaller(), makeDto());
    advance(600_000);
    await service.create(makeCaller(), makeDto({ candidate: { provider: 'mock', model: 'both' } }));
    await service.create(makeCaller(), makeDto({ baseline: { provider: 'mock', model: 'smart' }, candidate: { provider: 'mock', model: 'fast' } }));
    const over = await failure(service.create(makeCaller(), makeDto({ baseline: { provider: 'mock', model: 'both' }, candidate: { provider: 'mock', model: 'fast' } })));
    expect([over.code, over.headers]).toEqual(['rate_limited', { 'Retry-After': '3000' }]);
    expect(repo.rows).toHaveLength(3);
  });

  it('analytics store down: 503 internal with a generic message, nothing written', async () => {
    const { service, repo } = setup();
    repo.down = true;
    const err = await failure(service.create(makeCaller(), makeDto()));
    expect([err.code, err.status, err.message]).toEqual(['internal', 503, 'The experiments store is unavailable.']);
    expect((await failure(service.list(makeCaller()))).status).toBe(503);
    expect((await failure(service.rollback(makeCaller(), randomUUID()))).status).toBe(503);
    repo.down = false;
    expect([repo.rows.length, repo.events.length]).toEqual([0, 0]);
  });
});

describe('ExperimentsService.rollback (the state table)', () => {
  it('active → rolled_back with an event; rolled_back → same row and another event; completed → 409 and nothing written', async () => {
    const { service, repo, advance } = setup();
    const e = await service.create(makeCaller(), makeDto());
    advance(5_000);
    const rolled = await service.rollback(makeCaller({ keyId: 'ops' }), e.id);
    expect(rolled).toMatchObject({ id: e.id, status: 'rolled_back', startedAt: e.startedAt, endedAt: new Date(Date.UTC(2025, 0, 15, 12, 0, 5)) });
    const again = await service.rollback(makeCaller({ keyId: 'ops2' }), e.id);
    expect(toExperimentJson(again)).toEqual(toExperimentJson(rolled));
    expect(repo.events.slice(2).map((x) => [x.kind, x.actorApiKeyId, x.detail])).toEqual([
      ['rolled_back', 'ops', { from: 'active' }],
      ['rolled_back', 'ops2', { from: 'rolled_back' }],
    ]);

    const c = await service.create(makeCaller(), makeDto({ candidate: { provider: 'mock', model: 'both' } }));
    await service.complete(c.id, { quality: 1 });
    const eventsBefore = repo.events.length;
    const err = await failure(service.rollback(makeCaller(), c.id));
    expect([err.code, err.status]).toEqual(['completed_cannot_rollback', 409]);
    expect(repo.events).toHaveLength(eventsBefore);
    expect(repo.rows.find((r) => r.id === c.id)?.status).toBe('completed');
  });

  it('draft → rolled_back', async () => {
    const { service, repo } = setup();
    const e = await service.create(makeCaller(), makeDto());
    Object.assign(repo.rows[0], { status: 'draft', startedAt: null });
    expect(await service.rollback(makeCaller(), e.id)).toMatchObject({ status: 'rolled_back', startedAt: null });
    expect(repo.events.at(-1)).toMatchObject({ kind: 'rolled_back', detail: { from: 'draft' } });
  });

  it('missing and foreign ids are the same 404', async () => {
    const { service } = setup();
    const foreign = await service.create(makeCaller({ orgId: 'other' }), makeDto());
    const a = await failure(service.rollback(makeCaller(), foreign.id));
    const b = await failure(service.rollback(makeCaller(), randomUUID()));
    const c = await failure(service.rollback(makeCaller(), 'not-a-uuid'));
    for (const err of [a, b, c]) expect(err.toBody()).toEqual(a.toBody());
    expect([a.code, a.status]).toEqual(['not_found', 404]);
  });
});

describe('ExperimentsService system transitions', () => {
  it('complete and rollbackBySystem act on active experiments only, with no actor key', async () => {
    const { service, repo } = setup();
    const a = await service.create(makeCaller(), makeDto());
    const b = await service.create(makeCaller(), makeDto({ candidate: { provider: 'mock', model: 'both' } }));
    expect(await service.complete(a.id, { winner: 'candidate' })).toMatchObject({ status: 'completed', summary: { winner: 'candidate' } });
    expect(await service.rollbackBySystem(b.id, 'regression')).toMatchObject({ status: 'rolled_back', summary: null });
    expect(repo.events.slice(4).map((e) => [e.kind, e.actorApiKeyId, e.detail])).toEqual([
      ['completed', null, { actor: 'system', from: 'active' }],
      ['rolled_back', null, { actor: 'system', reason: 'regression', from: 'active' }],
    ]);
    expect(await service.complete(b.id, {})).toBeNull();
    expect(await service.rollbackBySystem(a.id, 'late')).toBeNull();
    expect(await service.complete(randomUUID(), {})).toBeNull();
    expect(repo.events).toHaveLength(6);
  });
});

describe('ExperimentsService.activeFor', () => {
  it('caches per organisation for the TTL, drops the cache on its own writes, keeps the last list when the store fails', async () => {
    const { service, repo, advance } = setup({ activeCacheTtlMs: 1_000 });
    const a = await service.create(makeCaller(), makeDto());
    expect((await service.activeFor('acme')).map((e) => e.id)).toEqual([a.id]);

    // Another replica's rollback (written behind this service's back) shows once the TTL passed.
    repo.rows[0].status = 'rolled_back';
    expect((await service.activeFor('acme')).map((e) => e.id)).toEqual([a.id]);
    advance(1_000);
    expect(await service.activeFor('acme')).toEqual([]);

    // This replica's own create is seen at once.
    const b = await service.create(makeCaller(), makeDto({ candidate: { provider: 'mock', model: 'both' } }));
    expect((await service.activeFor('acme')).map((e) => e.id)).toEqual([b.id]);

    repo.down = true;
    advance(5_000);
    expect((await service.activeFor('acme')).map((e) => e.id)).toEqual([b.id]);
    expect(await service.activeFor('never-seen')).toEqual([]);
  });
});

describe('ExperimentsService across replicas (shared version token)', () => {
  it("another replica's rollback, completion or create is seen on the next call, well inside the TTL", async () => {
    const { service: a, replica, advance } = setup({ activeCacheTtlMs: 60_000 });
    const b = replica();
    const e = await a.create(makeCaller(), makeDto());
    expect((await b.activeFor('acme')).map((x) => x.id)).toEqual([e.id]);
    advance(10);
    await a.rollback(makeCaller(), e.id);
    expect(await b.activeFor('acme')).toEqual([]);

    const c = await b.create(makeCaller(), makeDto({ candidate: { provider: 'mock', model: 'both' } }));
    expect((await a.activeFor('acme')).map((x) => x.id)).toEqual([c.id]);
    expect((await b.activeFor('acme')).map((x) => x.id)).toEqual([c.id]);
    await a.complete(c.id, {});
    expect(await b.activeFor('acme')).toEqual([]);
  });

  it('a list read before a change committed elsewhere is reloaded on the next call (the token is read first)', async () => {
    const { service: a, replica, repo } = setup({ activeCacheTtlMs: 60_000 });
    const b = replica();
    const e = await a.create(makeCaller(), makeDto());
    await b.activeFor('acme');
    // The row changes behind both replicas' backs, without a token change: the cached list stands...
    repo.rows[0].status = 'rolled_back';
    expect((await b.activeFor('acme')).map((x) => x.id)).toEqual([e.id]);
    // ...until any write of the organisation changes the token.
    await a.rollback(makeCaller(), e.id);
    expect(await b.activeFor('acme')).toEqual([]);
  });

  it('an organisation whose cached list is empty costs no cache-store read until the TTL passes', async () => {
    const cache = new SwitchableCache();
    const { service, advance } = setup({ cache, activeCacheTtlMs: 1_000 });
    await service.activeFor('acme');
    const first = cache.callsOf.get;
    for (let i = 0; i < 5; i++) await service.activeFor('acme');
    expect(cache.callsOf.get).toBe(first);
    advance(1_000);
    await service.activeFor('acme');
    expect(cache.callsOf.get).toBe(first + 1);
  });

  it('cache store down: writes still succeed, and other replicas see them once the TTL passed', async () => {
    const { service: a, replica, advance } = setup({ cache: deadCache(), activeCacheTtlMs: 1_000 });
    const b = replica();
    const e = await a.create(makeCaller(), makeDto());
    expect((await b.activeFor('acme')).map((x) => x.id)).toEqual([e.id]);
    expect((await a.rollback(makeCaller(), e.id)).status).toBe('rolled_back');
    expect((await b.activeFor('acme')).map((x) => x.id)).toEqual([e.id]);
    advance(1_000);
    expect(await b.activeFor('acme')).toEqual([]);
  });
});

describe('ExperimentsService regressions on rollback', () => {
  it('a manual rollback records one regression for the candidate pair; the idempotent repeats record none', async () => {
    const { service, regressions } = setup();
    const e = await service.create(makeCaller(), makeDto());
    await service.rollback(makeCaller({ keyId: 'ops' }), e.id);
    await service.rollback(makeCaller({ keyId: 'ops' }), e.id);
    expect(regressions.rows).toEqual([
      {
        orgId: 'acme',
        provider: 'mock',
        model: 'smart',
        reason: 'experiment_rolled_back',
        detail: { experiment_id: e.id, experiment_type: 'canary', baseline: { provider: 'mock', model: 'fast' }, actor: 'ops' },
      },
    ]);
  });

  it('a system rollback records one with actor system and the reason; completion records none', async () => {
    const { service, regressions } = setup();
    const a = await service.create(makeCaller(), makeDto());
    const b = await service.create(makeCaller(), makeDto({ candidate: { provider: 'mock', model: 'both' } }));
    await service.complete(a.id, {});
    await service.rollbackBySystem(b.id, 'stop_rule_regression');
    await service.rollbackBySystem(b.id, 'stop_rule_regression');
    expect(regressions.rows.map((r) => [r.provider, r.model, r.reason, r.detail.actor, r.detail.reason, r.detail.experiment_id])).toEqual([
      ['mock', 'both', 'experiment_rolled_back', 'system', 'stop_rule_regression', b.id],
    ]);
  });

  it('a regression store failure neither fails nor undoes the rollback', async () => {
    const { service, regressions, repo } = setup();
    const e = await service.create(makeCaller(), makeDto());
    regressions.failing = true;
    expect((await service.rollback(makeCaller(), e.id)).status).toBe('rolled_back');
    expect(repo.rows[0].status).toBe('rolled_back');
  });
});

describe('toExperimentJson', () => {
  it('has exactly the contract fields, times in ISO 8601 UTC, and no stop rule', () => {
    const json = toExperimentJson(
      makeExperiment({
        status: 'rolled_back',
        trafficPct: 12.5,
        baseline: { provider: 'mock', model: 'fast' },
        candidate: { provider: 'mock', model: 'smart' },
        stopRule: { minN: 100, maxRegression: 0.05 },
        startedAt: new Date(Date.UTC(2025, 0, 1, 10, 0, 0, 5)),
        endedAt: new Date(Date.UTC(2025, 0, 1, 11, 0, 0)),
        createdAt: new Date(0),
      }),
    );
    expect(json).toEqual({
      id: 'e1',
      type: 'canary',
      status: 'rolled_back',
      traffic_pct: 12.5,
      baseline: { provider: 'mock', model: 'fast' },
      candidate: { provider: 'mock', model: 'smart' },
      started_at: '2025-01-01T10:00:00.005Z',
      ended_at: '2025-01-01T11:00:00.000Z',
      summary: null,
    });
  });
});
