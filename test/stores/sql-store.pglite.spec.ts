import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadEnv } from '../../src/config/env';
import { ANALYTICS_MIGRATIONS, readMigrations, type AppliedMigration } from '../../src/stores/sql/migrator';
import { createSqlStore } from '../../src/stores/sql/sql-store.factory';
import { PgliteWorkerSqlStore } from '../../src/stores/sql/pglite-worker-sql.store';
import { createTestPglite, pgliteTemplate } from '../support/pglite';
import { ALL_TABLES, sqlStoreContract } from './sql-store.contract';

sqlStoreContract('PGlite', async ({ migrated }) => {
  const store = await createTestPglite({ migrated });
  return { store, peer: async () => store, cleanup: () => store.close() };
});

sqlStoreContract('PGlite in a worker thread', async ({ migrated }) => {
  const store = await PgliteWorkerSqlStore.create({ loadDataDir: await pgliteTemplate({ migrated }) });
  return { store, peer: async () => store, cleanup: () => store.close() };
});

describe('PgliteWorkerSqlStore', () => {
  it('refuses a call on the store from inside its own transaction, and queues other callers behind an open one', async () => {
    const store = await PgliteWorkerSqlStore.create({ loadDataDir: await pgliteTemplate() });
    try {
      await expect(store.transaction(async () => store.query('SELECT 1', []))).rejects.toThrow(/inside its own transaction/);
      await store.query('CREATE TABLE t (v int)', []);
      const order: string[] = [];
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const tx = store.transaction(async (t) => {
        await t.query('INSERT INTO t VALUES ($1)', [1]);
        order.push('tx inserted');
        await gate;
        await t.query('INSERT INTO t VALUES ($1)', [2]);
        order.push('tx done');
      });
      // Sent while the transaction is open: it must not run inside it, nor see its uncommitted rows.
      await new Promise((r) => setTimeout(r, 20));
      const outside = store.query<{ n: number }>('SELECT count(*)::int AS n FROM t', []).then((r) => {
        order.push(`outside saw ${r.rows[0].n}`);
      });
      await new Promise((r) => setTimeout(r, 20));
      release();
      await Promise.all([tx, outside]);
      expect(order).toEqual(['tx inserted', 'tx done', 'outside saw 2']);
      // A failed transaction rolls back and keeps the database's error fields (SQLSTATE).
      const failed = store.transaction(async (t) => {
        await t.query('INSERT INTO t VALUES ($1)', [3]);
        await t.query('INSERT INTO missing_table VALUES ($1)', [1]);
      });
      await expect(failed).rejects.toMatchObject({ code: '42P01' });
      expect((await store.query<{ n: number }>('SELECT count(*)::int AS n FROM t', [])).rows[0].n).toBe(2);
    } finally {
      await store.close();
    }
    await expect(store.query('SELECT 1', [])).rejects.toThrow(/closed/);
  });
});

describe('PgliteWorkerSqlStore on a data dir', () => {
  it('fails calls at once while its worker is down, restarts it, and keeps the data', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'gw-pglite-worker-'));
    const store = await PgliteWorkerSqlStore.create({ dataDir });
    try {
      await store.query('CREATE TABLE kept (v int)', []);
      await store.query('INSERT INTO kept VALUES ($1)', [7]);
      await store.crashForTest();
      await expect(store.query('SELECT 1', [])).rejects.toThrow(/worker stopped/);
      await expect(store.ping(500)).rejects.toThrow();
      let rows: Array<{ v: number }> | undefined;
      for (let i = 0; i < 100 && !rows; i++) {
        await new Promise((r) => setTimeout(r, 100));
        rows = await store.query<{ v: number }>('SELECT v FROM kept', []).then((r) => r.rows, () => undefined);
      }
      expect(rows).toEqual([{ v: 7 }]);
      await store.ping(2_000);
    } finally {
      await store.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('PgliteSqlStore', () => {
  it('refuses a call on the store from inside its own transaction instead of waiting forever', async () => {
    const store = await createTestPglite();
    try {
      await expect(store.transaction(async () => store.query('SELECT 1', []))).rejects.toThrow(/inside its own transaction/);
      await expect(store.transaction(async () => store.transaction(async () => 1))).rejects.toThrow(/inside its own transaction/);
      // Work started inside a transaction may still use the store once the transaction has ended.
      let later: Promise<unknown> | undefined;
      await store.transaction(async () => {
        later = new Promise((r) => setTimeout(r, 20)).then(() => store.query('SELECT 1 AS ok', []));
      });
      await expect(later).resolves.toMatchObject({ rows: [{ ok: 1 }] });
    } finally {
      await store.close();
    }
  });
});

describe('createSqlStore (embedded)', () => {
  let dataDir: string;
  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'gw-pglite-factory-'));
  });
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('opens a file-backed PGlite under <dataDir>/pglite, migrates it, and keeps data across restarts', async () => {
    const env = loadEnv({ GATEWAY_DATA_DIR: dataDir });
    let applied: AppliedMigration[] = [];
    const started = Date.now();
    // No hooks, exactly as the app calls it: migrations must run regardless of the hook.
    const first = await createSqlStore(env);
    const firstStartMs = Date.now() - started;
    try {
      expect(first.kind).toBe('pglite');
      const versions = await first.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version', []);
      expect(versions.rows.map((r) => Number(r.version))).toEqual(readMigrations(ANALYTICS_MIGRATIONS.dir).map((m) => m.version));
      const { rows } = await first.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = 'public' AND table_name = ANY($1)`,
        [ALL_TABLES],
      );
      expect(rows[0].n).toBe(ALL_TABLES.length);
      await first.query(`INSERT INTO organizations (id, name, plan) VALUES ('persisted', 'P', 'free')`, []);
    } finally {
      await first.close();
    }

    const restarted = Date.now();
    const second = await createSqlStore(env, { onMigrated: (a) => (applied = a) });
    const secondStartMs = Date.now() - restarted;
    try {
      expect(applied).toEqual([]);
      expect((await second.query('SELECT name FROM organizations WHERE id = $1', ['persisted'])).rows).toEqual([{ name: 'P' }]);
    } finally {
      await second.close();
    }
    // The number the issue note asks for (start + migrate of the embedded store); informative, not asserted.
    console.info(`PGlite start + migrate: first start ${firstStartMs} ms, restart ${secondStartMs} ms`);
  }, 60_000);
});
