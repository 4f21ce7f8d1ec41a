import { createTestStore } from '../support/postgres';
import { describeWithPostgres } from '../support/real-servers';
import { driftQueueMigrationContract } from './drift-queue-migration.contract';

describeWithPostgres('migration 0015 on a real Postgres', () => {
  driftQueueMigrationContract('Postgres', () => createTestStore({ migrated: false }));
});
