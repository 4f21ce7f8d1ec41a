import type { BreakerOp, BreakerParams, SettleCounter, SettleWindow, SpendCounter, SpendWindow, WindowCheck } from '../../../src/stores/cache/cache-store';
import { MemoryCacheStore } from '../../../src/stores/cache/memory-cache.store';
import { SqlResult, SqlStore } from '../../../src/stores/sql/sql-store';

export { SwitchableSql } from '../switchable-sql';

export type CacheCall = 'get' | 'set' | 'del' | 'hitWindows' | 'incrementBelow' | 'spend' | 'settle' | 'breaker' | 'ping';

/**
 * The real in-process cache store, counting its calls, that can be switched off: while `down`, every
 * call (close aside) rejects with `failure`, as a dead Redis's do ("Connection is closed." is what
 * ioredis says). Fakes over mocks: everything else is MemoryCacheStore's own behaviour.
 */
export class SwitchableCache extends MemoryCacheStore {
  down = false;
  failure = 'Connection is closed.';
  readonly callsOf: Record<CacheCall, number> = { get: 0, set: 0, del: 0, hitWindows: 0, incrementBelow: 0, spend: 0, settle: 0, breaker: 0, ping: 0 };

  /** Calls of every kind so far. */
  get calls(): number {
    return Object.values(this.callsOf).reduce((a, b) => a + b, 0);
  }

  override async get(key: string) {
    this.gate('get');
    return super.get(key);
  }
  override async set(key: string, value: string, ttlMs: number) {
    this.gate('set');
    return super.set(key, value, ttlMs);
  }
  override async del(...keys: string[]) {
    this.gate('del');
    return super.del(...keys);
  }
  override async hitWindows(checks: readonly WindowCheck[]) {
    this.gate('hitWindows');
    return super.hitWindows(checks);
  }
  override async incrementBelow(key: string, limit: number, ttlMs: number) {
    this.gate('incrementBelow');
    return super.incrementBelow(key, limit, ttlMs);
  }
  override async spend(windows: readonly SpendWindow[], counters: readonly SpendCounter[]) {
    this.gate('spend');
    return super.spend(windows, counters);
  }
  override async settle(windows: readonly SettleWindow[], counters: readonly SettleCounter[]) {
    this.gate('settle');
    return super.settle(windows, counters);
  }
  override async breaker(key: string, op: BreakerOp, params: BreakerParams, nowMs?: number, repeat?: number) {
    this.gate('breaker');
    return super.breaker(key, op, params, nowMs, repeat);
  }
  override async ping(timeoutMs: number) {
    this.gate('ping');
    return super.ping(timeoutMs);
  }

  private gate(call: CacheCall): void {
    this.callsOf[call]++;
    if (this.down) throw new Error(this.failure);
  }
}

/**
 * An analytics store the test expects never to be reached: every query and transaction rejects.
 * For a code path that must not touch SQL, and as the store under a repository whose methods a
 * spec's in-memory fake overrides.
 */
export class UnusedSql extends SqlStore {
  readonly kind = 'pglite' as const;
  async query<R extends object>(): Promise<SqlResult<R>> {
    throw new Error('the analytics store is not used here');
  }
  async transaction<T>(): Promise<T> {
    throw new Error('the analytics store is not used here');
  }
  async ping(): Promise<void> {}
  async close(): Promise<void> {}
}
