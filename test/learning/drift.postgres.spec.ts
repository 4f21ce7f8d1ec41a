import { PgSqlStore } from '../../src/stores/sql/pg-sql.store';
import { createTestDatabase } from '../support/postgres';
import { describeWithPostgres } from '../support/real-servers';
import { driftContract } from './drift.contract';

describeWithPostgres('change detection on a real Postgres', () => {
  driftContract('Postgres', async () => {
    const db = await createTestDatabase();
    const store = new PgSqlStore(db.url);
    const peers: PgSqlStore[] = [];
    return {
      store,
      peer: async () => {
        const peer = new PgSqlStore(db.url);
        peers.push(peer);
        return peer;
      },
      cleanup: async () => {
        await Promise.all([store, ...peers].map((s) => s.close()));
        await db.drop();
      },
    };
  });
});
