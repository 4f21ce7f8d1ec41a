import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadEnv } from '../../src/config/env';
import { createSqlStore } from '../../src/stores/sql/sql-store.factory';
import { SqlVectorStore } from '../../src/stores/vector/sql-vector.store';
import { createVectorStore } from '../../src/stores/vector/vector-store.factory';
import { createTestPglite } from '../support/pglite';
import { vectorStoreContract } from './vector-store.contract';

vectorStoreContract('PGlite', async () => {
  const sql = await createTestPglite();
  const store = new SqlVectorStore(sql, { ownsStore: true });
  await store.start();
  return { store, sql, cleanup: () => store.close() };
});

describe('createVectorStore (embedded)', () => {
  it('serves the vector store from the analytics PGlite instance, and closing it leaves that instance open', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'gw-vector-factory-'));
    const env = loadEnv({ GATEWAY_DATA_DIR: dataDir });
    const sql = await createSqlStore(env);
    try {
      const vector = await createVectorStore(env, sql);
      expect(vector.kind).toBe('pglite');
      await expect(vector.status(2_000)).resolves.toEqual({ up: true });
      await vector.upsert({ orgId: 'o', model: 'm', key: 'k', embedding: [1, 0], payload: 'p' });
      // Same database: the row is visible through the analytics store's connection.
      expect((await sql.query('SELECT payload, dims FROM semantic_cache WHERE key = $1', ['k'])).rows).toEqual([{ payload: 'p', dims: 2 }]);
      expect((await sql.query('SELECT version FROM vector_schema_migrations', [])).rows).toEqual([{ version: 1 }]);
      await vector.close();
      await expect(sql.ping(2_000)).resolves.toBeUndefined();
    } finally {
      await sql.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});
