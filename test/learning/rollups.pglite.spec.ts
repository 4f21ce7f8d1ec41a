import { createTestPglite } from '../support/pglite';
import { rollupsContract } from './rollups.contract';

rollupsContract('PGlite', async () => {
  const store = await createTestPglite();
  return { store, peer: async () => store, cleanup: () => store.close() };
});
