import { tenancyRig } from '../../test/support/tenancy-rig';

/**
 * Requests that arrive together with a key this replica does not hold yet (a restart under load, a
 * client's first burst) share one lookup: one read of the shared cache and at most one query,
 * whatever their number, and each gets the answer it would have got alone.
 */
const YAML = `
organizations:
  acme:
    api_keys:
      - { id: one, key: gw-key-one }
      - { id: two, key: gw-key-two }
`;

describe('TenancyService: concurrent lookups of a key not held here', () => {
  it('share one shared-cache read and one query; other keys keep their own', async () => {
    const r = await tenancyRig(YAML);
    try {
      const [gets, queries] = [r.cache.callsOf.get, r.sql.queries];
      const keys = [...Array<string>(32).fill('gw-key-one'), ...Array<string>(8).fill('gw-no-such-key'), 'gw-key-two'];
      const answers = await Promise.all(keys.map((k) => r.tenancy.authenticate(k)));
      expect(answers.map((a) => a?.keyId ?? null)).toEqual([...Array<string>(32).fill('one'), ...Array<null>(8).fill(null), 'two']);
      // Three keys, three lookups: each a read of the shared cache, then a query.
      expect([r.cache.callsOf.get - gets, r.sql.queries - queries]).toEqual([3, 3]);
      // Held now: no store call at all.
      expect(await r.auth('gw-key-one')).toMatchObject({ answer: { keyId: 'one' }, calls: {}, queries: 0 });
    } finally {
      await r.close();
    }
  });

  it('a lookup that failed is not kept: the requests that shared it fail alike, and the next one asks again', async () => {
    const r = await tenancyRig(YAML);
    try {
      r.sql.down = true;
      const failed = await Promise.allSettled(Array.from({ length: 5 }, () => r.tenancy.authenticate('gw-key-one')));
      expect(failed.map((f) => f.status)).toEqual(Array(5).fill('rejected'));
      expect(failed.map((f) => (f as PromiseRejectedResult).reason.status)).toEqual(Array(5).fill(503));
      r.sql.down = false;
      const queries = r.sql.queries;
      expect((await r.tenancy.authenticate('gw-key-one'))?.keyId).toBe('one');
      expect(r.sql.queries - queries).toBe(1);
    } finally {
      await r.close();
    }
  });
});
