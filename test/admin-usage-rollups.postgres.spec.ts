import { usageRollupsContract } from './admin-usage-rollups.contract';
import { createTestStore } from './support/postgres';
import { describeWithPostgres } from './support/real-servers';

describeWithPostgres('usage rollups on a real Postgres', () => {
  usageRollupsContract('Postgres', () => createTestStore());
});
