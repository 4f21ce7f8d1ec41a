import { closedPort } from '../../test/support/kit';
import { MemoryCacheStore } from '../stores/cache/memory-cache.store';
import { isRedisOutage } from '../stores/cache/redis-outage';
import { RedisCacheStore } from '../stores/cache/redis-cache.store';
import { isPostgresOutage } from '../stores/sql/postgres-outage';
import { GuardedCacheStore } from './guarded-stores';
import { StoreUnavailableError } from './store-guard';

const settings = { probe_interval_ms: 50, probe_timeout_ms: 50 };

describe('outage classification', () => {
  it('Postgres: socket errors, dropped connections, pg timeouts and SQLSTATE 08 / 57P01-03 are outages; answers about the statement are not', () => {
    const pgError = (message: string, code?: string) => Object.assign(new Error(message), code ? { code } : {});
    for (const e of [
      pgError('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED'),
      pgError('Connection terminated unexpectedly'),
      pgError('timeout exceeded when trying to connect'),
      pgError('Query read timeout'),
      pgError('terminating connection due to administrator command', '57P01'),
      pgError('the database system is starting up', '57P03'),
      pgError('connection failure', '08006'),
    ]) {
      expect([e.message, isPostgresOutage(e)]).toEqual([e.message, true]);
    }
    for (const e of [
      pgError('duplicate key value violates unique constraint', '23505'),
      pgError('canceling statement due to statement timeout', '57014'),
      pgError('syntax error at or near', '42601'),
      pgError('No such experiment', 'MONTHLY_LIMIT_EXCEEDED'),
      'a string',
    ]) {
      expect([String(e), isPostgresOutage(e)]).toEqual([String(e), false]);
    }
  });

  it("Redis: anything but Redis's own error reply or the caller's bad arguments is an outage", () => {
    expect(isRedisOutage(new Error('Connection is closed.'))).toBe(true);
    expect(isRedisOutage(new Error("Stream isn't writeable and enableOfflineQueue options is false"))).toBe(true);
    expect(isRedisOutage(Object.assign(new Error('ERR script error'), { name: 'ReplyError' }))).toBe(false);
    expect(isRedisOutage(new RangeError('ttlMs must be a positive number'))).toBe(false);
  });
});

describe('GuardedCacheStore', () => {
  it('on a Redis that refuses connections: the first call fails, the next are refused without reaching the client', async () => {
    const redis = new RedisCacheStore({ url: `redis://127.0.0.1:${await closedPort()}`, maxReconnectDelayMs: 50 });
    const store = new GuardedCacheStore(redis, { settings });
    try {
      const first = await store.get('k').catch((e: unknown) => e);
      expect(first).not.toBeInstanceOf(StoreUnavailableError);
      expect(store.guard.available).toBe(false);
      await expect(store.hitWindows([{ key: 'w', limit: 1, windowMs: 1000 }])).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(store.set('k', 'v', 1000)).rejects.toBeInstanceOf(StoreUnavailableError);
      // Readiness asks Redis itself, never the guard's memory.
      await expect(store.ping(200)).rejects.not.toBeInstanceOf(StoreUnavailableError);
    } finally {
      await store.close();
    }
  });

  it('passes every call of a healthy store through unchanged', async () => {
    const store = new GuardedCacheStore(new MemoryCacheStore(), { settings });
    try {
      await store.set('k', 'v', 1000);
      expect(await store.get('k')).toBe('v');
      expect((await store.incrementBelow('c', 1, 1000)).allowed).toBe(true);
      expect((await store.incrementBelow('c', 1, 1000)).allowed).toBe(false);
      await expect(store.set('k', 'v', -1)).rejects.toBeInstanceOf(RangeError);
      expect(store.guard.available).toBe(true);
    } finally {
      await store.close();
    }
  });
});
