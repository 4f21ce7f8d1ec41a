import { ModelStatsRepository } from '../../src/learning/model-stats.repository';
import { PgSqlStore } from '../../src/stores/sql/pg-sql.store';
import { createTestDatabase } from '../support/postgres';
import { describeWithPostgres } from '../support/real-servers';
import { DERIVED_TABLES } from './aggregation.contract';
import { rollupsContract } from './rollups.contract';

describeWithPostgres('rollups on a real Postgres', () => {
  rollupsContract('Postgres', async () => {
    const db = await createTestDatabase();
    const store = new PgSqlStore(db.url);
    const peers: PgSqlStore[] = [];
    return {
      store,
      peer: async () => {
        const peer = new PgSqlStore(db.url);
        peers.push(peer);
        return peer;
      },
      cleanup: async () => {
        await Promise.all([store, ...peers].map((s) => s.close()));
        await db.drop();
      },
    };
  });

  /*
   * Writers commit out of order: a batch written in a transaction that began first (an older trace,
   * an answer) commits after a later one. A created_at or sequence watermark would pass it by; the
   * beat waits for it (its transaction id is below the next beat's snapshot xmin only once it has
   * ended) and takes it in on the beat after its commit.
   */
  describe('a writer that commits after a later one', () => {
    let url: string;
    let drop: () => Promise<void>;
    let store: PgSqlStore;
    let writer: PgSqlStore;
    beforeAll(async () => {
      const db = await createTestDatabase();
      url = db.url;
      drop = db.drop;
      store = new PgSqlStore(url);
      writer = new PgSqlStore(url);
    });
    afterAll(async () => {
      await Promise.all([store.close(), writer.close()]);
      await drop();
    });

    const trace = (session: string, ageHours: number, latency: number) => ({
      sql: `INSERT INTO decision_traces (request_id, org_id, api_key_id, session_id, endpoint, requested_model, selected_provider, selected_model,
                                         status, latency_ms, cost_usd, created_at)
            VALUES ($1, 'acme', 'k', $1, 'chat', 'm', 'p', 'm', 200, $2, 0.001, now() - $3::float8 * interval '1 hour')`,
      params: [session, latency, ageHours],
    });
    const answer = (session: string, score: number) => ({
      sql: `INSERT INTO feedback (org_id, session_id, score, useful) VALUES ('acme', $1, $2, true)
            ON CONFLICT (org_id, session_id) DO UPDATE SET score = EXCLUDED.score, useful = EXCLUDED.useful, updated_at = now()`,
      params: [session, score],
    });

    it('is taken in once it commits, exactly once, and the figures equal the full recompute', async () => {
      await store.query(`TRUNCATE decision_traces, feedback, ${DERIVED_TABLES}`, []);
      const repo = new ModelStatsRepository(store);
      const params = { windowSeconds: 30 * 86_400, weights: { score: 0.6, useful: 0.4 } };
      await repo.recompute(params);

      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let begun!: () => void;
      const wrote = new Promise<void>((r) => (begun = r));
      // The slow writer: an old trace (2 days) and an answer, uncommitted until released.
      const slow = writer.transaction(async (tx) => {
        for (const s of [trace('s-slow', 48, 300), answer('s-slow', 9)]) await tx.query(s.sql, s.params);
        begun();
        await gate;
      });
      await wrote;
      // A later writer commits first: a newer trace of another session, and its answer.
      for (const s of [trace('s-fast', 0.1, 100), answer('s-fast', 7)]) await store.query(s.sql, s.params);

      // The beat waits for the open writer: neither is taken in yet (the snapshot's xmin is the slow one's id).
      expect(await repo.recompute(params)).toBe('done');
      expect(await repo.loadAll()).toEqual([]);

      release();
      await slow;
      expect(await repo.recompute(params)).toBe('done');
      expect(await repo.recompute(params)).toBe('done');
      const beat = await repo.loadAll();
      // Both sessions, once each: s-slow 9 (a promoter), s-fast 7 (a passive).
      expect(beat.find((r) => r.orgId === 'acme')).toMatchObject({ n: 2, requests: 2, npsPassives: 1, npsPromoters: 1 });
      const { rows } = await store.query<{ window_start: Date }>(`SELECT window_start FROM rollup_state WHERE name = 'learning'`, []);
      await repo.recomputeFromTraces({ ...params, windowStart: new Date(rows[0].window_start) });
      const oracle = await repo.loadAll();
      const strip = (xs: typeof beat) => xs.map(({ computedAt: _c, ...r }) => r).sort((a, b) => a.orgId.localeCompare(b.orgId));
      expect(strip(beat).map((r) => [r.orgId, r.n, r.requests, r.npsDetractors, r.npsPassives, r.npsPromoters])).toEqual(
        strip(oracle).map((r) => [r.orgId, r.n, r.requests, r.npsDetractors, r.npsPassives, r.npsPromoters]),
      );
      for (const [b, o] of strip(beat).map((r, i) => [r, strip(oracle)[i]] as const)) expect(b.outcomeMean).toBeCloseTo(o.outcomeMean, 9);
    });
  });
});
