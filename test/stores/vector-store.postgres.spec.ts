import { spawnSync } from 'node:child_process';
import { loadEnv } from '../../src/config/env';
import { MigrationError, runMigrations } from '../../src/stores/sql/migrator';
import { PgSqlStore } from '../../src/stores/sql/pg-sql.store';
import { SqlVectorStore, VECTOR_EXTENSION_MISSING, VECTOR_MIGRATIONS, VectorStoreUnavailableError } from '../../src/stores/vector/sql-vector.store';
import { createVectorStore } from '../../src/stores/vector/vector-store.factory';
import { createTestDatabase, type TestDatabase } from '../support/postgres';
import { describeWithPostgres, TEST_DATABASE_URL } from '../support/real-servers';
import { vectorStoreContract } from './vector-store.contract';

/*
 * Which suite applies depends on the server, and jest needs to know while collecting tests, before
 * any async hook runs: ask the server synchronously, once, in a child process.
 */
function serverHasPgvector(): boolean {
  if (!TEST_DATABASE_URL) return false;
  const probe = `const { Client } = require('pg'); const c = new Client({ connectionString: process.argv[1], connectionTimeoutMillis: 5000 });
    c.connect().then(() => c.query("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"))
      .then((r) => { process.stdout.write(r.rowCount ? 'yes' : 'no'); return c.end(); })
      .catch((e) => { process.stderr.write(String(e)); process.exit(2); });`;
  const r = spawnSync(process.execPath, ['-e', probe, TEST_DATABASE_URL], { encoding: 'utf8', cwd: __dirname, timeout: 15_000 });
  if (r.status !== 0) throw new Error(`could not ask the test Postgres about pgvector: ${r.stderr || r.error}`);
  return r.stdout === 'yes';
}

const hasPgvector = serverHasPgvector();
const pepper = { GATEWAY_KEY_PEPPER: 'test-pepper' };

describeWithPostgres('VectorStore on a real Postgres', () => {
  let db: TestDatabase;
  let sql: PgSqlStore;
  beforeAll(async () => {
    db = await createTestDatabase();
    sql = new PgSqlStore(db.url);
  });
  afterAll(async () => {
    await sql?.close();
    await db?.drop();
  });

  // Exactly one of the next two blocks applies to a given server, and each asserts; the other is not registered.
  if (!hasPgvector) describe('without the vector extension (Debian’s Postgres 15)', () => {
    it('starts anyway: the store reports down with the reason and refuses work, the analytics store is unaffected', async () => {
      const env = loadEnv({ DATABASE_URL: db.url, ...pepper });
      const store = await createVectorStore(env, sql, { retryIntervalMs: 0 });
      expect(store.kind).toBe('postgres');
      // retryIntervalMs 0: this status() also retried start-up, and still finds no extension.
      await expect(store.status(2_000)).resolves.toEqual({ up: false, reason: VECTOR_EXTENSION_MISSING });
      await expect(store.upsert({ orgId: 'o', model: 'm', key: 'k', embedding: [1, 0], payload: 'p' })).rejects.toBeInstanceOf(VectorStoreUnavailableError);
      await expect(store.nearest('o', 'm', [1, 0], 1)).rejects.toThrow(VECTOR_EXTENSION_MISSING);
      await store.close();
      // Shared with the analytics store (same URL): closing the vector store left it open.
      await expect(sql.query('SELECT count(*)::int AS n FROM organizations', [])).resolves.toMatchObject({ rows: [{ n: 0 }] });
    });

    it('maps the failing migration itself to the same reason, and the failed migration leaves nothing behind', async () => {
      const err = await runMigrations(sql, VECTOR_MIGRATIONS).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(MigrationError);
      expect(['58P01', '0A000']).toContain(((err as MigrationError).cause as { code?: string }).code);
      const { rows } = await sql.query<{ t: string | null }>(`SELECT to_regclass('public.semantic_cache')::text AS t`, []);
      expect(rows).toEqual([{ t: null }]);
      expect((await sql.query('SELECT 1 FROM vector_schema_migrations', [])).rowCount).toBe(0);
    });
  });

  if (hasPgvector) describe('with the vector extension', () => {
    vectorStoreContract('Postgres', async () => {
      const store = new SqlVectorStore(sql, { ownsStore: false });
      await store.start();
      return { store, sql, cleanup: () => store.close() };
    });
  });

  it('starts even when VECTOR_DATABASE_URL cannot be reached, and reports the connection error', async () => {
    const env = loadEnv({ DATABASE_URL: db.url, VECTOR_DATABASE_URL: 'postgres://postgres@127.0.0.1:1/vectors', ...pepper });
    const started = Date.now();
    const store = await createVectorStore(env, sql, { retryIntervalMs: 60_000 });
    expect(Date.now() - started).toBeLessThan(5_000);
    const status = await store.status(1_000);
    expect(status).toEqual({ up: false, reason: expect.stringContaining('ECONNREFUSED') });
    await store.close();
    await expect(sql.ping(1_000)).resolves.toBeUndefined();
  });
});
