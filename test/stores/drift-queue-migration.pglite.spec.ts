import { createTestPglite } from '../support/pglite';
import { driftQueueMigrationContract } from './drift-queue-migration.contract';

driftQueueMigrationContract('PGlite', async () => {
  const store = await createTestPglite({ migrated: false });
  return { store, cleanup: () => store.close() };
});
