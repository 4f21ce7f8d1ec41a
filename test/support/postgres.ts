/**
 * A fresh database per test file on the real Postgres of TEST_DATABASE_URL (as immich
 * does): copied from a migrated template, which is built once per migration content and reused by
 * every worker and run. Building it is guarded by an advisory lock, so parallel jest workers wait for
 * one builder instead of racing.
 */
import { createHash, randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { ANALYTICS_MIGRATIONS, readMigrations, runMigrations } from '../../src/stores/sql/migrator';
import { PgSqlStore } from '../../src/stores/sql/pg-sql.store';
import { TEST_DATABASE_URL } from './real-servers';

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

const TEMPLATE_LOCK = 'routing-gateway test template';

/** `url` with its database name replaced. */
export function databaseUrl(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

function adminUrl(): string {
  if (!TEST_DATABASE_URL) throw new Error('TEST_DATABASE_URL is not set (use describeWithPostgres)');
  return TEST_DATABASE_URL;
}

async function withAdmin<T>(fn: (admin: Client) => Promise<T>): Promise<T> {
  const admin = new Client({ connectionString: adminUrl(), connectionTimeoutMillis: 5_000 });
  await admin.connect();
  try {
    return await fn(admin);
  } finally {
    await admin.end();
  }
}

/* Database names are generated here from hex and pids, never taken from input; DDL cannot take them as parameters. */
const ident = (name: string): string => {
  if (!/^[a-z0-9_]+$/.test(name)) throw new Error(`unexpected database name ${name}`);
  return `"${name}"`;
};

async function ensureTemplate(admin: Client): Promise<string> {
  const h = createHash('sha256');
  for (const m of readMigrations(ANALYTICS_MIGRATIONS.dir)) h.update(`${m.version}:${m.name}:${m.sql}`);
  const template = `gw_tpl_${h.digest('hex').slice(0, 16)}`;
  await admin.query('SELECT pg_advisory_lock(hashtext($1))', [TEMPLATE_LOCK]);
  try {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [template]);
    if (exists.rowCount) return template;
    // Built under another name and renamed when complete: a builder that died halfway leaves no template behind.
    const wip = `${template}_wip`;
    await admin.query(`DROP DATABASE IF EXISTS ${ident(wip)} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${ident(wip)}`);
    const store = new PgSqlStore(databaseUrl(adminUrl(), wip), { max: 1 });
    try {
      await runMigrations(store, ANALYTICS_MIGRATIONS);
    } finally {
      await store.close();
    }
    await admin.query(`ALTER DATABASE ${ident(wip)} RENAME TO ${ident(template)}`);
    return template;
  } finally {
    await admin.query('SELECT pg_advisory_unlock(hashtext($1))', [TEMPLATE_LOCK]);
  }
}

/** A store on a new test database (createTestDatabase's options); `cleanup()` closes it and drops the database. */
export async function createTestStore(options: { migrated?: boolean } = {}): Promise<{ store: PgSqlStore; cleanup: () => Promise<void> }> {
  const db = await createTestDatabase(options);
  const store = new PgSqlStore(db.url);
  return {
    store,
    cleanup: async () => {
      await store.close();
      await db.drop();
    },
  };
}

/**
 * A new database on the test server: a copy of the migrated template (default), or empty
 * (`migrated: false`) for migration tests. `drop()` removes it, closing leftover connections.
 */
export async function createTestDatabase(options: { migrated?: boolean } = {}): Promise<TestDatabase> {
  const name = `gw_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  await withAdmin(async (admin) => {
    if (options.migrated ?? true) {
      const template = await ensureTemplate(admin);
      await admin.query(`CREATE DATABASE ${ident(name)} TEMPLATE ${ident(template)}`);
    } else {
      await admin.query(`CREATE DATABASE ${ident(name)}`);
    }
  });
  return {
    url: databaseUrl(adminUrl(), name),
    drop: () => withAdmin(async (admin) => void (await admin.query(`DROP DATABASE IF EXISTS ${ident(name)} WITH (FORCE)`))),
  };
}
