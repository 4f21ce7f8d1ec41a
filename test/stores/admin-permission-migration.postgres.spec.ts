import { createTestStore } from '../support/postgres';
import { describeWithPostgres } from '../support/real-servers';
import { adminPermissionMigrationContract } from './admin-permission-migration.contract';

describeWithPostgres('migration 0007 on a real Postgres', () => {
  adminPermissionMigrationContract('Postgres', () => createTestStore({ migrated: false }));
});
