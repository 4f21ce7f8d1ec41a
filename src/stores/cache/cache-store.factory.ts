import type { Logger } from 'pino';
import type { EnvConfig } from '../../config/env';
import { CacheStore } from './cache-store';
import { MemoryCacheStore } from './memory-cache.store';

export interface CacheStoreFactoryOptions {
  /** Where the Redis adapter reports connection errors, throttled. */
  logger?: Logger;
  /** Upper bound of every Redis call. */
  commandTimeoutMs?: number;
}

/**
 * Redis when `REDIS_URL` is set, else the in-process store. Never throws for an
 * unreachable Redis and never waits for it: the gateway starts and serves, the client keeps
 * reconnecting, and readiness reports the cache as degraded through `ping` (docs/architecture.md "Degrade, never hang").
 */
export function createCacheStore(env: Pick<EnvConfig, 'redisUrl'>, options: CacheStoreFactoryOptions = {}): CacheStore {
  // `ioredis` is loaded only when Redis is configured (docs/architecture.md "Memory: what an idle gateway holds").
  if (env.redisUrl) return new (require('./redis-cache.store') as typeof import('./redis-cache.store')).RedisCacheStore({ url: env.redisUrl, logger: options.logger, commandTimeoutMs: options.commandTimeoutMs });
  return new MemoryCacheStore();
}
