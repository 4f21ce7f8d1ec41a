import type { EnvConfig } from '../../config/env';
import type { SqlStore } from '../sql/sql-store';
import { postgresStore } from '../sql/sql-store.factory';
import { SqlVectorStore } from './sql-vector.store';
import type { VectorStore } from './vector-store';

export interface CreateVectorStoreOptions {
  /** While down, how often status() retries start-up (default 30 s). */
  retryIntervalMs?: number;
}

/**
 * The vector store. It shares the analytics store's connection when both name the same
 * database (and always when embedded: one PGlite instance serves both), else opens its own pool at
 * VECTOR_DATABASE_URL. Never rejects: a server without pgvector, or one that cannot be reached, gives
 * a store whose status() is down with the reason, while the rest of the gateway starts.
 */
export async function createVectorStore(env: EnvConfig, sql: SqlStore, options: CreateVectorStoreOptions = {}): Promise<VectorStore> {
  const url = env.vectorDatabaseUrl;
  const shared = url === undefined || (sql.kind === 'postgres' && url === env.databaseUrl);
  const store = new SqlVectorStore(shared ? sql : postgresStore(url), { ownsStore: !shared, retryIntervalMs: options.retryIntervalMs });
  const target = shared ? (sql.kind === 'postgres' ? env.databaseUrl : undefined) : url;
  if (target === undefined) {
    await store.start();
    return store;
  }
  // Same reason as the analytics migrations: no request-sized statement timeout while building indexes.
  const migrator = postgresStore(target, { max: 1, statementTimeoutMs: 600_000, queryTimeoutMs: 601_000 });
  try {
    await store.start(migrator);
  } finally {
    await migrator.close().catch(() => undefined);
  }
  return store;
}
