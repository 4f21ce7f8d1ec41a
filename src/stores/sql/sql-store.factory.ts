import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { errorMessage } from '../../common/errors/error-message';
import type { EnvConfig } from '../../config/env';
import { ANALYTICS_MIGRATIONS, runMigrations, type AppliedMigration } from './migrator';
import type { PgSqlStore, PgSqlStoreOptions } from './pg-sql.store';
import { PgliteDirLockedError } from './pglite-dir-lock';
import { PgliteWorkerSqlStore } from './pglite-worker-sql.store';
import type { SqlStore } from './sql-store';

/** The analytics store cannot be had at start-up; the message is meant to be printed as one line. */
export class StoreStartupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StoreStartupError';
  }
}

export interface CreateSqlStoreHooks {
  /** Told which migrations this start applied (empty when the schema was current). */
  onMigrated?(applied: AppliedMigration[]): void;
}

/*
 * Migrations get their own short-lived connection without the runtime statement timeout: building an
 * index on a large table may take minutes, while a request's query must fail within seconds.
 */
const MIGRATION_TIMEOUTS = { max: 1, statementTimeoutMs: 600_000, queryTimeoutMs: 601_000, idleInTransactionTimeoutMs: 600_000 };

/**
 * The analytics store, migrated: Postgres when DATABASE_URL is set, else PGlite under
 * `<dataDir>/pglite`. Rejects with StoreStartupError when the database cannot be reached or a
 * migration fails: without it the gateway cannot serve (readiness would be 503 anyway).
 */
export async function createSqlStore(env: EnvConfig, hooks: CreateSqlStoreHooks = {}): Promise<SqlStore> {
  return env.databaseUrl ? createPg(env.databaseUrl, hooks) : createPglite(resolve(env.dataDir, 'pglite'), hooks);
}

/**
 * A store on a Postgres server. `pg` is required here, not imported at the top: an embedded gateway
 * never loads it (docs/architecture.md "Memory: what an idle gateway holds").
 */
export function postgresStore(url: string, options?: PgSqlStoreOptions): PgSqlStore {
  const { PgSqlStore } = require('./pg-sql.store') as typeof import('./pg-sql.store');
  return new PgSqlStore(url, options);
}

async function createPg(url: string, hooks: CreateSqlStoreHooks): Promise<SqlStore> {
  const where = `Postgres at ${describeUrl(url)} (DATABASE_URL)`;
  const store = postgresStore(url);
  try {
    await store.ping(5_000);
  } catch (err) {
    await store.close().catch(() => undefined);
    throw new StoreStartupError(`analytics store: cannot reach ${where}: ${errorMessage(err)}`);
  }
  const migrator = postgresStore(url, MIGRATION_TIMEOUTS);
  try {
    // Not `onMigrated?.(await run…)`: optional call skips evaluating its argument when the hook is absent.
    const applied = await runMigrations(migrator, ANALYTICS_MIGRATIONS);
    hooks.onMigrated?.(applied);
  } catch (err) {
    await store.close().catch(() => undefined);
    throw new StoreStartupError(`analytics store: migrating ${where} failed: ${errorMessage(err)}`);
  } finally {
    await migrator.close().catch(() => undefined);
  }
  return store;
}

async function createPglite(dataDir: string, hooks: CreateSqlStoreHooks): Promise<SqlStore> {
  let store: PgliteWorkerSqlStore;
  // A Postgres data directory has PG_VERSION once initdb has run.
  const fresh = !existsSync(join(dataDir, 'PG_VERSION'));
  try {
    store = await PgliteWorkerSqlStore.create({ dataDir });
  } catch (err) {
    // Its message names the directory and the process holding it.
    if (err instanceof PgliteDirLockedError) throw new StoreStartupError(`analytics store: ${err.message}`);
    throw new StoreStartupError(`analytics store: cannot open the embedded database in ${dataDir}: ${errorMessage(err)}`);
  }
  try {
    const applied = await runMigrations(store, ANALYTICS_MIGRATIONS);
    hooks.onMigrated?.(applied);
  } catch (err) {
    await store.close().catch(() => undefined);
    throw new StoreStartupError(`analytics store: migrating the embedded database in ${dataDir} failed: ${errorMessage(err)}`);
  }
  // initdb grows PGlite's WebAssembly memory (≈ 400 MiB more RSS), and that memory is never given
  // back: after creating the database, reopen it in a fresh worker.
  if (fresh) {
    try {
      await store.reopen();
    } catch (err) {
      await store.close().catch(() => undefined);
      throw new StoreStartupError(`analytics store: reopening the embedded database in ${dataDir} failed: ${errorMessage(err)}`);
    }
  }
  return store;
}

/** host:port/database, never the password the URL may carry. */
export function describeUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname || 'localhost'}:${u.port || '5432'}${u.pathname || ''}`;
  } catch {
    return 'the configured server';
  }
}
