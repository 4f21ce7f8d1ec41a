/**
 * Migration 0007 on an existing installation (docs/api.md "Admin API"): the demo key made by a first
 * embedded start before the Admin API existed operates its organisation, so the migration grants it
 * `admin`, once; keys from gateway.yaml, the CLI or the API keep exactly the permissions they were
 * given. An old database is migrated to 0006 (as a previous version left it), given its keys, and
 * migrated to the current schema.
 */
import { ANALYTICS_MIGRATIONS, runMigrations } from '../../src/stores/sql/migrator';
import type { SqlStore } from '../../src/stores/sql/sql-store';
import { migrationsUpTo } from './decision-traces-by-day.contract';

export interface MigrationStoreHandle {
  /** An empty database: no migration applied. */
  store: SqlStore;
  cleanup(): Promise<void>;
}

const KEYS: Array<[id: string, source: string, permissions: string[]]> = [
  ['demo-old', 'demo', ['read', 'write']],
  ['demo-admin-already', 'demo', ['read', 'write', 'admin']],
  ['from-config', 'config', ['read', 'write']],
  ['from-cli', 'cli', ['read']],
  ['from-api', 'api', ['write']],
];

export function adminPermissionMigrationContract(name: string, open: () => Promise<MigrationStoreHandle>): void {
  describe(`migration 0007 grants admin to an existing demo key (${name})`, () => {
    it('the demo key gains admin once; every other key keeps its permissions', async () => {
      const h = await open();
      const old = migrationsUpTo(6);
      try {
        await runMigrations(h.store, old.set);
        await h.store.query(`INSERT INTO organizations (id, name, plan, source) VALUES ('demo', 'Demo', 'pro', 'demo')`, []);
        for (const [id, source, permissions] of KEYS) {
          await h.store.query(`INSERT INTO api_keys (id, org_id, key_hash, key_prefix, permissions, source) VALUES ($1, 'demo', $2, 'gw-', $3::text[], $4)`, [
            id,
            `hash-${id}`,
            permissions,
            source,
          ]);
        }
        const applied = await runMigrations(h.store, ANALYTICS_MIGRATIONS);
        expect(applied.map((m) => m.version)).toContain(7);

        const { rows } = await h.store.query<{ id: string; permissions: string[] }>(`SELECT id, permissions FROM api_keys ORDER BY id`, []);
        expect(rows).toEqual([
          { id: 'demo-admin-already', permissions: ['read', 'write', 'admin'] },
          { id: 'demo-old', permissions: ['read', 'write', 'admin'] },
          { id: 'from-api', permissions: ['write'] },
          { id: 'from-cli', permissions: ['read'] },
          { id: 'from-config', permissions: ['read', 'write'] },
        ]);
        // Migrating again is a no-op: nothing pending, nothing granted twice.
        expect(await runMigrations(h.store, ANALYTICS_MIGRATIONS)).toEqual([]);
        const again = await h.store.query<{ permissions: string[] }>(`SELECT permissions FROM api_keys WHERE id = 'demo-old'`, []);
        expect(again.rows[0].permissions).toEqual(['read', 'write', 'admin']);
      } finally {
        old.cleanup();
        await h.cleanup();
      }
    }, 120_000);
  });
}
