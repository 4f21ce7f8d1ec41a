import { createTestPglite } from '../support/pglite';
import { adminPermissionMigrationContract } from './admin-permission-migration.contract';

adminPermissionMigrationContract('PGlite', async () => {
  const store = await createTestPglite({ migrated: false });
  return { store, cleanup: () => store.close() };
});
