import { createTestPglite } from '../support/pglite';
import { aggregationContract } from './aggregation.contract';

aggregationContract('PGlite', async () => {
  const store = await createTestPglite();
  return { store, peer: async () => store, cleanup: () => store.close() };
});
