import { Global, Inject, Module, OnApplicationShutdown } from '@nestjs/common';
import { AppLogger } from '../common/logging/logger';
import { AppConfig } from '../config/app-config';
import { CacheStore } from './cache/cache-store';
import { createCacheStore } from './cache/cache-store.factory';
import { SqlStore } from './sql/sql-store';
import { createSqlStore } from './sql/sql-store.factory';
import { VectorStore } from './vector/vector-store';
import { createVectorStore } from './vector/vector-store.factory';

/**
 * The three stores of DESIGN §2, each bound to its port: server adapters when a URL is configured,
 * embedded defaults otherwise. Migrations run while the SQL store is created.
 */
@Global()
@Module({
  providers: [
    { provide: SqlStore, useFactory: (c: AppConfig) => createSqlStore(c.env), inject: [AppConfig] },
    { provide: CacheStore, useFactory: (c: AppConfig, l: AppLogger) => createCacheStore(c.env, { logger: l.pino }), inject: [AppConfig, AppLogger] },
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
