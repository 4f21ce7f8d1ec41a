import { PgSqlStore } from '../src/stores/sql/pg-sql.store';
import { usageRollupsContract } from './admin-usage-rollups.contract';
import { createTestDatabase } from './support/postgres';
import { describeWithPostgres } from './support/real-servers';

describeWithPostgres('usage rollups on a real Postgres', () => {
  usageRollupsContract('Postgres', async () => {
    const db = await createTestDatabase();
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
