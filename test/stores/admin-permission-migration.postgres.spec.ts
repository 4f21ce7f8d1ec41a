import { PgSqlStore } from '../../src/stores/sql/pg-sql.store';
import { createTestDatabase } from '../support/postgres';
import { describeWithPostgres } from '../support/real-servers';
import { adminPermissionMigrationContract } from './admin-permission-migration.contract';

describeWithPostgres('migration 0007 on a real Postgres', () => {
  adminPermissionMigrationContract('Postgres', async () => {
    const db = await createTestDatabase({ migrated: false });
    const store = new PgSqlStore(db.url);
    return {
      store,
      cleanup: async () => {
        await store.close();
        await db.drop();
      },
    };
  });
});
