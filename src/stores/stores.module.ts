import { Global, Inject, Module, OnApplicationShutdown } from '@nestjs/common';
import { AppLogger } from '../common/logging/logger';
import { AppConfig } from '../config/app-config';
import { MetricsService } from '../metrics/metrics.service';
import { GuardedCacheStore, GuardedSqlStore, type GuardWiring } from '../resilience/guarded-stores';
import { CacheStore } from './cache/cache-store';
import { createCacheStore } from './cache/cache-store.factory';
import { SqlStore } from './sql/sql-store';
import { createSqlStore } from './sql/sql-store.factory';
import { VectorStore } from './vector/vector-store';
import { createVectorStore } from './vector/vector-store.factory';

/**
 * The three stores (docs/architecture.md "Three stores behind ports"), each bound to its port: server adapters when a URL is configured,
 * embedded defaults otherwise. Migrations run while the SQL store is created. The server adapters
 * sit behind a store breaker (resilience/guarded-stores.ts): a dead or frozen server is stopped
 * being called after its first timeout and probed in the background.
 */
const wiring = (c: AppConfig, l: AppLogger, m: MetricsService): GuardWiring => ({ settings: c.gateway.stores, logger: l.pino, availability: m.storeAvailable });

@Global()
@Module({
  providers: [
    {
      provide: SqlStore,
      useFactory: async (c: AppConfig, l: AppLogger, m: MetricsService) => {
        const store = await createSqlStore(c.env);
        // The embedded store runs in this process: there is no outage to route around, and a long
        // aggregation it is busy with must not mark it unavailable.
        return store.kind === 'postgres' ? new GuardedSqlStore(store, wiring(c, l, m)) : store;
      },
      inject: [AppConfig, AppLogger, MetricsService],
    },
    {
      provide: CacheStore,
      useFactory: (c: AppConfig, l: AppLogger, m: MetricsService) => {
        const store = createCacheStore(c.env, { logger: l.pino, commandTimeoutMs: c.gateway.stores.cache_command_timeout_ms });
        return store.kind === 'redis' ? new GuardedCacheStore(store, wiring(c, l, m)) : store;
      },
      inject: [AppConfig, AppLogger, MetricsService],
    },
    { provide: VectorStore, useFactory: (c: AppConfig, sql: SqlStore) => createVectorStore(c.env, sql), inject: [AppConfig, SqlStore] },
  ],
  exports: [SqlStore, CacheStore, VectorStore],
})
export class StoresModule implements OnApplicationShutdown {
  constructor(
    @Inject(SqlStore) private readonly sql: SqlStore,
    @Inject(CacheStore) private readonly cache: CacheStore,
    @Inject(VectorStore) private readonly vector: VectorStore,
  ) {}

  async onApplicationShutdown(): Promise<void> {
    await Promise.allSettled([this.vector.close(), this.cache.close()]);
    await this.sql.close();
  }
}
