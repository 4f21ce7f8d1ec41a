/**
 * One contract for the vector store on any pgvector database. It runs on PGlite
 * always, and on the real Postgres only when that server has pgvector (Debian's Postgres 15 has not;
 * vector-store.postgres.spec.ts then asserts the store reports down instead).
 */
import type { SqlStore } from '../../src/stores/sql/sql-store';
import { nearestSql, VectorStoreUnavailableError } from '../../src/stores/vector/sql-vector.store';
import type { VectorStore } from '../../src/stores/vector/vector-store';

export interface VectorStoreHandle {
  store: VectorStore;
  /** The database underneath, to inspect query plans. */
  sql: SqlStore;
  cleanup(): Promise<void>;
}

let seq = 0;
const uniqueOrg = (): string => `org-${process.pid}-${Date.now()}-${seq++}`;

/** A unit vector in the plane of the first two axes at `degrees`, padded to `dims`. */
function at(degrees: number, dims = 3): number[] {
  const v = new Array<number>(dims).fill(0);
  v[0] = Math.cos((degrees * Math.PI) / 180);
  v[1] = Math.sin((degrees * Math.PI) / 180);
  return v;
}
const cosineDistance = (degrees: number): number => 1 - Math.cos((degrees * Math.PI) / 180);

export function vectorStoreContract(name: string, makeStore: () => Promise<VectorStoreHandle>): void {
  describe(`VectorStore contract: ${name}`, () => {
    let h: VectorStoreHandle;
    let store: VectorStore;
    beforeAll(async () => {
      h = await makeStore();
      store = h.store;
    });
    afterAll(() => h?.cleanup());

    it('reports up', async () => {
      await expect(store.status(2_000)).resolves.toEqual({ up: true });
    });

    it('finds an upserted entry at distance 0, whatever its length (cosine, not euclidean)', async () => {
      const org = uniqueOrg();
      await store.upsert({ orgId: org, model: 'm', key: 'k1', embedding: [1, 2, 3], payload: 'p1' });
      const [hit] = await store.nearest(org, 'm', [2, 4, 6], 5);
      expect(hit.key).toBe('k1');
      expect(hit.payload).toBe('p1');
      expect(hit.distance).toBeCloseTo(0, 5);
    });

    it('replaces the entry with the same key instead of adding one', async () => {
      const org = uniqueOrg();
      await store.upsert({ orgId: org, model: 'm', key: 'k', embedding: at(0), payload: 'old' });
      await store.upsert({ orgId: org, model: 'm', key: 'k', embedding: at(90), payload: 'new' });
      const hits = await store.nearest(org, 'm', at(90), 10);
      expect(hits).toEqual([{ key: 'k', payload: 'new', distance: expect.any(Number) }]);
      expect(hits[0].distance).toBeCloseTo(0, 5);
    });

    it('returns the k nearest, nearest first, with their cosine distances', async () => {
      const org = uniqueOrg();
      for (const deg of [120, 10, 60, 179, 30]) {
        await store.upsert({ orgId: org, model: 'm', key: `d${deg}`, embedding: at(deg), payload: String(deg) });
      }
      const hits = await store.nearest(org, 'm', at(0), 3);
      expect(hits.map((x) => x.key)).toEqual(['d10', 'd30', 'd60']);
      hits.forEach((x) => expect(x.distance).toBeCloseTo(cosineDistance(Number(x.payload)), 5));
      const all = await store.nearest(org, 'm', at(180), 10);
      expect(all.map((x) => x.key)).toEqual(['d179', 'd120', 'd60', 'd30', 'd10']);
    });

    it('keeps organisations, models and embedding sizes apart', async () => {
      const a = uniqueOrg();
      const b = uniqueOrg();
      await store.upsert({ orgId: a, model: 'm1', key: 'same-key', embedding: at(0), payload: 'a/m1' });
      await store.upsert({ orgId: a, model: 'm2', key: 'same-key', embedding: at(0), payload: 'a/m2' });
      await store.upsert({ orgId: b, model: 'm1', key: 'same-key', embedding: at(0), payload: 'b/m1' });
      await store.upsert({ orgId: a, model: 'm1', key: 'wider', embedding: at(0, 4), payload: 'a/m1/4d' });
      expect((await store.nearest(a, 'm1', at(0), 10)).map((x) => x.payload)).toEqual(['a/m1']);
      expect((await store.nearest(a, 'm2', at(0), 10)).map((x) => x.payload)).toEqual(['a/m2']);
      expect((await store.nearest(b, 'm1', at(0), 10)).map((x) => x.payload)).toEqual(['b/m1']);
      expect((await store.nearest(a, 'm1', at(0, 4), 10)).map((x) => x.payload)).toEqual(['a/m1/4d']);
      expect(await store.nearest(uniqueOrg(), 'm1', at(0), 10)).toEqual([]);
    });

    it('skips expired entries and keeps unexpired ones', async () => {
      const org = uniqueOrg();
      await store.upsert({ orgId: org, model: 'm', key: 'gone', embedding: at(0), payload: 'gone', expiresAt: new Date(Date.now() - 1_000) });
      await store.upsert({ orgId: org, model: 'm', key: 'kept', embedding: at(5), payload: 'kept', expiresAt: new Date(Date.now() + 60_000) });
      await store.upsert({ orgId: org, model: 'm', key: 'forever', embedding: at(10), payload: 'forever' });
      expect((await store.nearest(org, 'm', at(0), 10)).map((x) => x.key)).toEqual(['kept', 'forever']);
      // Renewing an expired key brings it back.
      await store.upsert({ orgId: org, model: 'm', key: 'gone', embedding: at(0), payload: 'renewed' });
      expect((await store.nearest(org, 'm', at(0), 1)).map((x) => x.payload)).toEqual(['renewed']);
    });

    it('serves the common model sizes, including 3072 (half precision), through their HNSW index', async () => {
      for (const dims of [384, 1536, 3072]) {
        const org = uniqueOrg();
        await store.upsert({ orgId: org, model: 'm', key: 'near', embedding: at(1, dims), payload: 'near' });
        await store.upsert({ orgId: org, model: 'm', key: 'far', embedding: at(90, dims), payload: 'far' });
        const hits = await store.nearest(org, 'm', at(0, dims), 2);
        expect(hits.map((x) => x.key)).toEqual(['near', 'far']);
        expect(hits[0].distance).toBeCloseTo(cosineDistance(1), 3);

        const { sql, indexed } = nearestSql(dims);
        expect(indexed).toBe(true);
        const plan = await h.sql.transaction(async (tx) => {
          // With a handful of rows the planner rightly prefers the (org, model, key) btree plus a sort;
          // forbidding scans and sorts leaves only an ordered index path, if the HNSW index can serve the query at all.
          await tx.query('SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off; SET LOCAL enable_bitmapscan = off', []);
          const { rows } = await tx.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sql}`, [org, 'm', `[${at(0, dims).join(',')}]`, 2]);
          return rows.map((r) => r['QUERY PLAN']).join('\n');
        });
        expect(plan).toContain(`semantic_cache_hnsw_${dims}_idx`);
      }
    });

    it('refuses embeddings that cannot be compared by cosine', async () => {
      const org = uniqueOrg();
      await expect(store.upsert({ orgId: org, model: 'm', key: 'z', embedding: [0, 0, 0], payload: '' })).rejects.toThrow(RangeError);
      await expect(store.upsert({ orgId: org, model: 'm', key: 'n', embedding: [1, Number.NaN], payload: '' })).rejects.toThrow(RangeError);
      await expect(store.nearest(org, 'm', [], 1)).rejects.toThrow(RangeError);
      await expect(store.nearest(org, 'm', [1, 0], 0)).rejects.toThrow(RangeError);
      expect(new VectorStoreUnavailableError('x').message).toBe('vector store unavailable: x');
    });
  });
}
