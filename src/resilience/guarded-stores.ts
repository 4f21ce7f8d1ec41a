import type { Logger } from 'pino';
import { Gauge } from 'prom-client';
import {
  BreakerDecision, BreakerOp, BreakerParams, CacheStore, CounterDecision, SettleCounter, SettleWindow, SpendCounter, SpendDecision, SpendWindow, WindowCheck,
  WindowDecision,
} from '../stores/cache/cache-store';
import { isRedisOutage } from '../stores/cache/redis-outage';
import { isPostgresOutage } from '../stores/sql/postgres-outage';
import { QueryOptions, SqlExecutor, SqlResult, SqlStore } from '../stores/sql/sql-store';
import { StoreGuard } from './store-guard';

/** Config `stores` (docs/operations.md "Store outages"). */
export interface StoreGuardSettings {
  probe_interval_ms: number;
  probe_timeout_ms: number;
}

export interface GuardWiring {
  settings: StoreGuardSettings;
  logger?: Logger;
  /** `gateway_store_available{store}`: 1 while calls go through, 0 while they are refused. */
  availability?: Gauge<'store'>;
}

function guardFor(store: 'cache' | 'analytics', ping: (ms: number) => Promise<void>, isOutage: (err: unknown) => boolean, w: GuardWiring): StoreGuard {
  w.availability?.set({ store }, 1);
  return new StoreGuard({
    store,
    ping,
    isOutage,
    probeIntervalMs: w.settings.probe_interval_ms,
    probeTimeoutMs: w.settings.probe_timeout_ms,
    logger: w.logger,
    onChange: (available) => w.availability?.set({ store }, available ? 1 : 0),
  });
}

/**
 * Redis behind the store breaker: once a call times out or finds no connection, every call is
 * refused at once (the callers' per-replica fallbacks answer) until a probe gets a PONG.
 * `ping` always reaches Redis, so readiness reports what Redis says, not what the guard remembers.
 */
export class GuardedCacheStore extends CacheStore {
  readonly guard: StoreGuard;

  constructor(
    private readonly inner: CacheStore,
    wiring: GuardWiring,
  ) {
    super();
    this.guard = guardFor('cache', (ms) => inner.ping(ms), isRedisOutage, wiring);
  }

  get kind() {
    return this.inner.kind;
  }

  get(key: string): Promise<string | null> {
    return this.guard.run(() => this.inner.get(key));
  }

  set(key: string, value: string, ttlMs: number): Promise<void> {
    return this.guard.run(() => this.inner.set(key, value, ttlMs));
  }

  del(...keys: string[]): Promise<void> {
    return this.guard.run(() => this.inner.del(...keys));
  }

  hitWindows(checks: readonly WindowCheck[]): Promise<WindowDecision> {
    return this.guard.run(() => this.inner.hitWindows(checks));
  }

  incrementBelow(key: string, limit: number, ttlMs: number): Promise<CounterDecision> {
    return this.guard.run(() => this.inner.incrementBelow(key, limit, ttlMs));
  }

  breaker(key: string, op: BreakerOp, params: BreakerParams, nowMs?: number, repeat?: number): Promise<BreakerDecision> {
    return this.guard.run(() => this.inner.breaker(key, op, params, nowMs, repeat));
  }

  spend(windows: readonly SpendWindow[], counters: readonly SpendCounter[]): Promise<SpendDecision> {
    return this.guard.run(() => this.inner.spend(windows, counters));
  }

  settle(windows: readonly SettleWindow[], counters: readonly SettleCounter[]): Promise<void> {
    return this.guard.run(() => this.inner.settle(windows, counters));
  }

  ping(timeoutMs: number): Promise<void> {
    return this.inner.ping(timeoutMs);
  }

  async close(): Promise<void> {
    this.guard.close();
    await this.inner.close();
  }
}

/**
 * Postgres behind the store breaker: once a call times out or finds the server gone, every call
 * and transaction is refused at once (keys serve from their last known records, traces wait in the
 * buffer, experiment writes answer 503 having changed nothing) until `SELECT 1` answers again.
 * A request-path read passes `deadlineMs`, so a server that accepts connections but never answers
 * holds it that long at most.
 */
export class GuardedSqlStore extends SqlStore {
  readonly guard: StoreGuard;

  constructor(
    private readonly inner: SqlStore,
    wiring: GuardWiring,
  ) {
    super();
    this.guard = guardFor('analytics', (ms) => inner.ping(ms), isPostgresOutage, wiring);
  }

  get kind() {
    return this.inner.kind;
  }

  query<R extends object = Record<string, unknown>>(sql: string, params?: readonly unknown[], options?: QueryOptions): Promise<SqlResult<R>> {
    return this.guard.run(() => this.inner.query<R>(sql, params), options?.deadlineMs);
  }

  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    return this.guard.run(() => this.inner.transaction(fn));
  }

  ping(timeoutMs: number): Promise<void> {
    return this.inner.ping(timeoutMs);
  }

  async close(): Promise<void> {
    this.guard.close();
    await this.inner.close();
  }
}
