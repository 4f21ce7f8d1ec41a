import { usageRollupsContract } from './admin-usage-rollups.contract';
import { createTestPglite } from './support/pglite';

usageRollupsContract('PGlite', async () => {
  const store = await createTestPglite();
  return { store, cleanup: () => store.close() };
});
