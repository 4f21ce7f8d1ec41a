import { createTestPglite } from '../support/pglite';
import { driftContract } from './drift.contract';

driftContract('PGlite', async () => {
  const store = await createTestPglite();
  return { store, peer: async () => store, cleanup: () => store.close() };
});
