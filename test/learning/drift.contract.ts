/**
 * The change detector in the learning beat (README "Drift: change detection"), on PGlite and on a
 * real Postgres (the same SQL runs on both): a drop flagged after tens of samples, the pair's window
 * restarting at the change point (the beat and the full recompute agree), a rise restarting it
 * without a regression, and each sample taken in exactly once whatever replicas, failed beats and
 * changed answers do.
 */
import type { ModelStats } from '../../src/learning/model-stats';
import { ModelStatsRepository } from '../../src/learning/model-stats.repository';
import { DRIFT_CUSUM, DriftRepository } from '../../src/learning/drift/drift.repository';
import { LearningRollups } from '../../src/learning/rollups/learning-rollups';
import { bucketCeil } from '../../src/learning/rollups/rollup-state';
import type { SqlExecutor, SqlStore } from '../../src/stores/sql/sql-store';
import type { AggregationStoreHandle } from './aggregation.contract';

const WEIGHTS = { score: 0.6, useful: 0.4 };
const BEAT = { windowSeconds: 30 * 86_400, weights: WEIGHTS, drift: { latencyTargetMs: 2000 } };

let seq = 0;
/** One successful chat trace of `model` for `session`, `ageSeconds` ago, and its answer (now). */
async function session(sql: SqlExecutor, org: string, id: string, model: string, ageSeconds: number, score: number, useful: boolean): Promise<void> {
  await chatTrace(sql, org, id, model, ageSeconds);
  await answer(sql, org, id, score, useful);
}

/** One chat trace of `model` (provider p) for session `id`, `ageSeconds` ago. */
async function chatTrace(sql: SqlExecutor, org: string, id: string, model: string, ageSeconds: number, latencyMs = 500, status = 200): Promise<void> {
  await sql.query(
    `INSERT INTO decision_traces (request_id, org_id, api_key_id, session_id, endpoint, requested_model, selected_provider, selected_model, status, latency_ms, created_at)
     VALUES ($1, $2, 'k', $3, 'chat', 'auto', 'p', $4, $5, $6, now() - $7::float8 * interval '1 second')`,
    [`req-${seq++}`, org, id, model, status, latencyMs, ageSeconds],
  );
}

async function answer(sql: SqlExecutor, org: string, id: string, score: number, useful: boolean): Promise<void> {
  await sql.query(
    `INSERT INTO feedback (org_id, session_id, score, useful) VALUES ($1, $2, $3, $4)
     ON CONFLICT (org_id, session_id) DO UPDATE SET score = EXCLUDED.score, useful = EXCLUDED.useful, updated_at = now()`,
    [org, id, score, useful],
  );
}

/** A steady model: scores cycling 8, 9, 10, 9 (always useful), y ≈ .93. */
const good = (i: number) => [8, 9, 10, 9][i % 4];
/** After the drop: 2, 3, 4, 3 (never useful), y ≈ .18. */
const bad = (i: number) => [2, 3, 4, 3][i % 4];

interface Epoch {
  model: string;
  direction: string;
  stream: string;
  since: Date;
}
async function epochs(sql: SqlExecutor): Promise<Epoch[]> {
  const { rows } = await sql.query<{ model: string; direction: string; stream: string; since: Date | string }>(
    'SELECT model, direction, stream, since FROM learning_epochs ORDER BY id',
    [],
  );
  return rows.map((r) => ({ ...r, since: new Date(r.since) }));
}

async function detectorSamples(sql: SqlExecutor, model: string, stream: 'outcome' | 'auto'): Promise<number> {
  const { rows } = await sql.query<{ samples: number | string }>(
    `SELECT (state ->> 'samples')::int AS samples FROM drift_detectors WHERE model = $1 AND stream = $2`,
    [model, stream],
  );
  return rows.length ? Number(rows[0].samples) : 0;
}

const byModel = (rows: ModelStats[], org: string, model: string) => rows.find((r) => r.orgId === org && r.model === model);

export function driftContract(name: string, open: () => Promise<AggregationStoreHandle>): void {
  describe(`change detection in the learning beat: ${name}`, () => {
    let h: AggregationStoreHandle;
    let sql: SqlStore;
    let repo: ModelStatsRepository;
    beforeEach(async () => {
      h = await open();
      sql = h.store;
      repo = new ModelStatsRepository(sql);
    });
    afterEach(async () => h.cleanup());

    it('flags a drop after tens of samples, records a regression, and restarts the pair window at the change point (beat = full recompute)', async () => {
      // An hour ago m-a answered well for 60 sessions and m-b alongside; then m-a drops.
      for (let i = 0; i < 60; i++) {
        await session(sql, 'acme', `before-${i}`, 'm-a', 3_600 - i, good(i), true);
        await session(sql, 'acme', `b-${i}`, 'm-b', 3_600 - i, 7, true);
      }
      expect(await repo.recompute(BEAT)).toBe('done');
      expect(await epochs(sql)).toEqual([]);
      for (let i = 0; i < 60; i++) await session(sql, 'acme', `after-${i}`, 'm-a', 1_800 - i, bad(i), false);
      await repo.recompute(BEAT);

      const found = await epochs(sql);
      expect(found.map(({ model, direction, stream }) => ({ model, direction, stream }))).toEqual([{ model: 'm-a', direction: 'drop', stream: 'outcome' }]);
      const { rows: firstAfter } = await sql.query<{ created_at: Date | string }>(
        `SELECT created_at FROM decision_traces WHERE session_id = 'after-0'`,
        [],
      );
      // The change point is the drop's first sample, within the microsecond the detector keeps (ms).
      expect(Math.abs(found[0].since.getTime() - new Date(firstAfter[0].created_at).getTime())).toBeLessThan(1);
      const alarmed = await detectorSamples(sql, 'm-a', 'outcome');
      expect(alarmed).toBe(120);
      // The request stream's test took in m-a's calls since its first step (the first beat's are its
      // history), up to its latest trace's time (the millisecond a Date keeps).
      expect(await detectorSamples(sql, 'm-a', 'auto')).toBe(60);
      const { rows: lastCall } = await sql.query<{ at: Date | string; last: Date | string }>(
        `SELECT d.last_sample_at AS at, (SELECT max(created_at) FROM decision_traces WHERE selected_model = 'm-a') AS last
         FROM drift_detectors d WHERE d.model = 'm-a' AND d.stream = 'auto'`,
        [],
      );
      expect(Math.abs(new Date(lastCall[0].at).getTime() - new Date(lastCall[0].last).getTime())).toBeLessThan(1);
      const { rows: regressions } = await sql.query<{ model: string; reason: string; detail: { direction: string; samples: number } }>(
        'SELECT model, reason, detail FROM regressions',
        [],
      );
      expect(regressions).toEqual([{ model: 'm-a', reason: 'change_detected', detail: expect.objectContaining({ direction: 'drop', stream: 'outcome' }) }]);
      // Detected after tens of samples of the drop.
      expect(regressions[0].detail.samples).toBeGreaterThanOrEqual(5);
      expect(regressions[0].detail.samples).toBeLessThanOrEqual(40);

      // The pair's window restarts at the change point: its 60 samples of the drop, the old ones kept but not counted.
      const beat = await repo.loadAll();
      expect(byModel(beat, 'acme', 'm-a')).toMatchObject({ n: 60, change: { direction: 'drop', since: found[0].since } });
      expect(byModel(beat, 'acme', 'm-a')!.outcomeMean).toBeCloseTo(0.6 * 0.3, 9);
      expect(byModel(beat, 'acme', 'm-b')).toMatchObject({ n: 60, change: null });
      expect(byModel(beat, '*', 'm-a')).toMatchObject({ n: 60 });
      const { rows: kept } = await sql.query<{ n: number | string }>(`SELECT sum(n) AS n FROM rollup_sample_hours WHERE model = 'm-a'`, []);
      expect(Number(kept[0].n)).toBe(120);

      // The full recompute from the raw rows, over the rollups' own window, gives the same table.
      const { rows: state } = await sql.query<{ window_start: Date | string }>(`SELECT window_start FROM rollup_state WHERE name = 'learning'`, []);
      await repo.recomputeFromTraces({ windowSeconds: BEAT.windowSeconds, weights: WEIGHTS, windowStart: new Date(state[0].window_start) });
      const oracle = await repo.loadAll();
      const figures = (rows: ModelStats[]) =>
        rows
          .map((r) => ({ key: `${r.orgId}/${r.model}`, n: r.n, requests: r.requests, mean: r.outcomeMean.toFixed(9), variance: r.outcomeVar.toFixed(9), success: r.successRate }))
          .sort((a, b) => a.key.localeCompare(b.key));
      expect(figures(oracle)).toEqual(figures(beat));

      // The restarted pair goes on: another 20 samples of the drop are counted, no new change.
      for (let i = 0; i < 20; i++) await session(sql, 'acme', `later-${i}`, 'm-a', 60 - i, bad(i), false);
      await repo.recompute(BEAT);
      expect(await epochs(sql)).toHaveLength(1);
      expect(byModel(await repo.loadAll(), 'acme', 'm-a')).toMatchObject({ n: 80 });
    });

    it('a rise restarts the window too, with no regression; a starved pair shows how many requests went elsewhere', async () => {
      for (let i = 0; i < 30; i++) await session(sql, 'acme', `low-${i}`, 'm-c', 3_000 - i, bad(i), false);
      await repo.recompute(BEAT);
      for (let i = 0; i < 30; i++) await session(sql, 'acme', `high-${i}`, 'm-c', 2_000 - i, good(i), true);
      await repo.recompute(BEAT);
      expect((await epochs(sql)).map((e) => [e.model, e.direction])).toEqual([['m-c', 'rise']]);
      expect((await sql.query('SELECT 1 FROM regressions', [])).rows).toHaveLength(0);
      const rows = await repo.loadAll();
      expect(byModel(rows, 'acme', 'm-c')).toMatchObject({ change: { direction: 'rise' }, served: { requestsSince: 0 } });
      expect(byModel(rows, 'acme', 'm-c')!.n).toBeGreaterThanOrEqual(30 - DRIFT_CUSUM.h);

      // Traffic goes elsewhere: m-c has served none of the organisation's last 25 requests.
      for (let i = 0; i < 25; i++) await session(sql, 'acme', `other-${i}`, 'm-d', 500 - i, 8, true);
      await repo.recompute(BEAT);
      expect(byModel(await repo.loadAll(), 'acme', 'm-c')).toMatchObject({ served: { requestsSince: 25 } });
    });

    it('tests a starved pair\'s re-tries against what it was: a rise found from a handful of samples, which without the hold its reference takes in', async () => {
      const starvedAfter = { requests: 30, seconds: 86_400 };
      const run = async (org: string, hold: boolean) => {
        const beat = { ...BEAT, drift: { ...BEAT.drift, starvedAfter: hold ? starvedAfter : undefined } };
        // The detector exists before the pair's traffic (requests before its first step are history).
        await session(sql, org, `${org}-first`, 'm-o', 4_000, 7, true);
        await repo.recompute(beat);
        // m-s answers poorly six times, then routing starves it: 40 requests go to m-o.
        for (let i = 0; i < 6; i++) await session(sql, org, `${org}-s-${i}`, 'm-s', 3_900 - i, [3, 5, 4, 6, 4, 5][i], i % 2 === 0);
        for (let i = 0; i < 40; i++) await session(sql, org, `${org}-o-${i}`, 'm-o', 3_800 - i, 7, true);
        await repo.recompute(beat);
        // A re-try: m-s answers well now.
        await session(sql, org, `${org}-retry-0`, 'm-s', 3_000, 10, true);
        await repo.recompute(beat);
        const testing = byModel(await repo.loadAll(), org, 'm-s')!;
        // It keeps answering well, routing following it up (a session of m-o between each).
        for (let i = 1; i < 30; i++) {
          await session(sql, org, `${org}-retry-${i}`, 'm-s', 3_000 - i, good(i), true);
          await session(sql, org, `${org}-o2-${i}`, 'm-o', 3_000 - i, 7, true);
          if (i % 5 === 0) await repo.recompute(beat);
        }
        await repo.recompute(beat);
        const { rows } = await sql.query<{ direction: string; stream: string; since: Date | string }>(
          `SELECT direction, stream, since FROM learning_epochs WHERE org_id = $1 AND model = 'm-s' ORDER BY id`,
          [org],
        );
        return { testing, epochs: rows.map((r) => ({ ...r, since: new Date(r.since) })) };
      };
      const held = await run('acme', true);
      expect(held.testing).toMatchObject({ riseTesting: true });
      expect(held.testing.riseEvidence).toBeGreaterThan(0);
      expect(held.epochs.map((e) => [e.direction, e.stream])).toEqual([['rise', 'outcome']]);
      const { rows: first } = await sql.query<{ created_at: Date | string }>(`SELECT created_at FROM decision_traces WHERE session_id = 'acme-retry-0'`, []);
      expect(Math.abs(held.epochs[0].since.getTime() - new Date(first[0].created_at).getTime())).toBeLessThan(1);
      expect((await sql.query('SELECT 1 FROM regressions', [])).rows).toHaveLength(0);
      // The window restarts at the re-try: the pair's figures are what it is now.
      expect(byModel(await repo.loadAll(), 'acme', 'm-s')!.outcomeMean).toBeGreaterThan(0.85);

      // The same answers without the hold: the six samples' reference takes the re-tries in, one by one, and no rise is ever found.
      const absorbed = await run('beta', false);
      expect(absorbed.testing).toMatchObject({ riseTesting: false });
      expect(absorbed.epochs).toEqual([]);
    });

    it('takes each sample in exactly once: replicas beating at once, a beat that fails half-way, answers changed later', async () => {
      const peer = await h.peer();
      const peerRepo = new ModelStatsRepository(peer);
      // The detector's first step starts at the rollups' watermark: requests from before it are history, not replayed.
      await repo.recompute(BEAT);
      let sessions = 0;
      let requests = 0;
      for (let round = 0; round < 4; round++) {
        for (let i = 0; i < 10; i++) {
          await session(sql, 'acme', `s-${round}-${i}`, 'm-a', 600 - round * 10 - i, good(i), true);
          sessions++;
          requests++;
        }
        // A failed request and a failed attempt are requests of the auto stream, never samples.
        await sql.query(
          `INSERT INTO decision_traces (request_id, org_id, api_key_id, session_id, endpoint, requested_model, selected_provider, selected_model, status, latency_ms, failed_attempts)
           VALUES ($1, 'acme', 'k', $2, 'chat', 'auto', 'p', 'm-a', 200, 400, '[{"provider":"p","model":"m-a","error":"status","status":503}]'::jsonb)`,
          [`req-${seq++}`, `s-${round}-0`],
        );
        requests += 2;
        await Promise.all([repo.recompute(BEAT), peerRepo.recompute(BEAT), repo.recompute(BEAT)]);
      }
      expect(await detectorSamples(sql, 'm-a', 'outcome')).toBe(sessions);
      expect(await detectorSamples(sql, 'm-a', 'auto')).toBe(requests);

      // A beat whose transaction fails after the detector's step adds nothing.
      for (let i = 0; i < 5; i++) await session(sql, 'acme', `cut-${i}`, 'm-a', 100 - i, good(i), true);
      await expect(
        sql.transaction(async (tx) => {
          await new LearningRollups().catchUp(tx, { windowSeconds: BEAT.windowSeconds });
          await new DriftRepository().step(tx, { weights: WEIGHTS, latencyTargetMs: 2000 });
          throw new Error('cut off');
        }),
      ).rejects.toThrow('cut off');
      expect(await detectorSamples(sql, 'm-a', 'outcome')).toBe(sessions);
      await repo.recompute(BEAT);
      expect(await detectorSamples(sql, 'm-a', 'outcome')).toBe(sessions + 5);
      expect(await detectorSamples(sql, 'm-a', 'auto')).toBe(requests + 5);

      // Answers changed later move the statistics, not the detector: a session is one sample, once.
      for (let i = 0; i < 5; i++) await answer(sql, 'acme', `cut-${i}`, 0, false);
      await repo.recompute(BEAT);
      expect(await detectorSamples(sql, 'm-a', 'outcome')).toBe(sessions + 5);
      const { rows } = await sql.query<{ n: number | string }>(`SELECT count(*) AS n FROM rollup_session_pairs WHERE model = 'm-a' AND score = 0`, []);
      expect(Number(rows[0].n)).toBe(5);

      // A beat without the detector's inputs leaves the new samples waiting; the next one takes them in.
      for (let i = 0; i < 3; i++) await session(sql, 'acme', `wait-${i}`, 'm-a', 50 - i, good(i), true);
      await repo.recompute({ windowSeconds: BEAT.windowSeconds, weights: WEIGHTS });
      expect(await detectorSamples(sql, 'm-a', 'outcome')).toBe(sessions + 5);
      await repo.recompute(BEAT);
      expect(await detectorSamples(sql, 'm-a', 'outcome')).toBe(sessions + 8);
      expect(await detectorSamples(sql, 'm-a', 'auto')).toBe(requests + 8);

      // A rebuild (the rollups' state removed: everything taken in again by a backfill) is history
      // to the detector: no sample counts twice. A session the backfill finds unanswered is fed once
      // its answer comes.
      await sql.query(
        `INSERT INTO decision_traces (request_id, org_id, api_key_id, session_id, endpoint, requested_model, selected_provider, selected_model, status, latency_ms, created_at)
         VALUES ($1, 'acme', 'k', 'late-answer', 'chat', 'auto', 'p', 'm-a', 200, 500, now() - interval '40 seconds')`,
        [`req-${seq++}`],
      );
      await repo.recompute(BEAT);
      const fedBefore = await detectorSamples(sql, 'm-a', 'outcome');
      const autoBefore = await detectorSamples(sql, 'm-a', 'auto');
      // Sessions written after that beat and before the rebuild (a bulk import, say) are history too.
      for (let i = 0; i < 3; i++) await session(sql, 'acme', `imported-${i}`, 'm-a', 3_000 + i, good(i), true);
      await sql.query(`DELETE FROM rollup_state WHERE name = 'learning'`, []);
      await repo.recompute({ ...BEAT, backfill: { budgetMs: 0, chunkRows: 7 } });
      for (let beats = 0; ; beats++) {
        const { rows: st } = await sql.query<{ pending: boolean }>(`SELECT backfill_txid IS NOT NULL AS pending FROM rollup_state WHERE name = 'learning'`, []);
        if (!st[0].pending) break;
        expect(beats).toBeLessThan(50);
        await repo.recompute({ ...BEAT, backfill: { budgetMs: 0, chunkRows: 7 } });
      }
      expect(await detectorSamples(sql, 'm-a', 'outcome')).toBe(fedBefore);
      expect(await detectorSamples(sql, 'm-a', 'auto')).toBe(autoBefore);
      await answer(sql, 'acme', 'late-answer', 9, true);
      await repo.recompute(BEAT);
      expect(await detectorSamples(sql, 'm-a', 'outcome')).toBe(fedBefore + 1);

      // A backlog larger than one step's batch is taken in over the next beats, each sample once.
      for (let i = 0; i < 10; i++) await session(sql, 'acme', `backlog-${i}`, 'm-a', 20 - i, good(i), true);
      const small = { ...BEAT, drift: { ...BEAT.drift, feedBatch: 4 } };
      for (const expected of [4, 8, 10, 10]) {
        await repo.recompute(small);
        expect(await detectorSamples(sql, 'm-a', 'outcome')).toBe(fedBefore + 1 + expected);
      }
    });

    it('fetches the request stream a few rows at a time, and its tests come out as from one fetch', async () => {
      for (let i = 0; i < 40; i++) await session(sql, 'acme', `warm-${i}`, 'm-a', 3_000 - i, good(i), true);
      await repo.recompute(BEAT);
      // Traces written alone and four to a transaction, mixed latencies and failures, two orgs: fetches of 2 cut across all of them.
      const latency = (i: number) => 200 + ((i * 7919) % 4_000);
      for (let i = 0; i < 30; i++) {
        if (i % 5 === 0) {
          await sql.transaction(async (tx) => {
            for (let j = 0; j < 4; j++) await chatTrace(tx, j % 2 ? 'beta' : 'acme', `multi-${i}-${j}`, j % 3 ? 'm-a' : 'm-b', 900 - i, latency(i + j), j === 3 ? 502 : 200);
          });
        } else await chatTrace(sql, i % 2 ? 'beta' : 'acme', `single-${i}`, i % 4 ? 'm-a' : 'm-b', 900 - i, latency(i), i % 7 === 0 ? 503 : 200);
      }
      const tables = ['drift_state', 'drift_detectors', 'drift_org_requests'];
      const before = await Promise.all(tables.map(async (t) => (await sql.query<Record<string, unknown>>(`SELECT * FROM ${t}`, [])).rows));
      const tests = async () =>
        (
          await sql.query<{ key: string; state: string; last: string; at: string }>(
            `SELECT org_id || '/' || model || '/' || stream AS key, state::text AS state, last_sample_at::text AS last, org_requests_at::text AS at
             FROM drift_detectors ORDER BY 1`,
            [],
          )
        ).rows;

      await repo.recompute({ ...BEAT, drift: { ...BEAT.drift, requestChunk: 2 } });
      const pieces = await tests();
      const requests = await sql.query<{ org_id: string; requests: string }>('SELECT org_id, requests::text AS requests FROM drift_org_requests ORDER BY 1', []);
      expect(requests.rows).toEqual([
        { org_id: 'acme', requests: '24' },
        { org_id: 'beta', requests: '24' },
      ]);
      expect(pieces.map((r) => r.key)).toEqual(['acme/m-a/auto', 'acme/m-a/outcome', 'acme/m-b/auto', 'beta/m-a/auto', 'beta/m-b/auto']);

      // The same step again from the same state, in one fetch.
      await sql.transaction(async (tx) => {
        for (const t of tables) await tx.query(`DELETE FROM ${t}`, []);
        for (const [i, t] of tables.entries()) {
          for (const row of before[i]) {
            const cols = Object.keys(row);
            await tx.query(
              `INSERT INTO ${t} (${cols.join(', ')}) SELECT ${cols.map((c) => `r.${c}`).join(', ')} FROM json_populate_record(null::${t}, $1::json) r`,
              [JSON.stringify(row)],
            );
          }
        }
      });
      await repo.recompute(BEAT);
      expect(await tests()).toEqual(pieces);
    });

    it('keeps the window since a change point as traces come (rollup_epoch_window): equal to its hours and to the full recompute, rebuilt for a later change, gone once the window passes it', async () => {
      // Without the detector: the change points are the test's own.
      const beat = { windowSeconds: BEAT.windowSeconds, weights: WEIGHTS };
      const trace = (id: string, model: string, ageSeconds: number, latencyMs: number, status = 200) => chatTrace(sql, 'acme', id, model, ageSeconds, latencyMs, status);
      const spread = (i: number) => 40 + ((i * 7919) % 1_900);
      for (let i = 0; i < 120; i++) {
        await trace(`e-${i}`, 'm-e', 18_000 - i * 150, spread(i), i % 9 === 0 ? 502 : 200);
        await trace(`f-${i}`, 'm-f', 18_000 - i * 150, spread(i + 3));
        if (i % 2 === 0) await answer(sql, 'acme', `e-${i}`, i % 11, i % 3 === 0);
      }
      await repo.recompute(beat);
      const epoch = async (model: string, ageSeconds: number) =>
        sql.query(`INSERT INTO learning_epochs (org_id, provider, model, since, direction, stream) VALUES ('acme', 'p', $1, now() - $2::float8 * interval '1 second', 'drop', 'outcome')`, [
          model,
          ageSeconds,
        ]);

      const agrees = async () => {
        await expectEpochWindowIsItsHours(sql);
        const rollups = await repo.loadAll();
        const { rows: state } = await sql.query<{ window_start: Date | string }>(`SELECT window_start FROM rollup_state WHERE name = 'learning'`, []);
        await repo.recomputeFromTraces({ windowSeconds: beat.windowSeconds, weights: WEIGHTS, windowStart: new Date(state[0].window_start) });
        const oracle = await repo.loadAll();
        const key = (r: ModelStats) => `${r.orgId}/${r.model}`;
        expect(rollups.map(key).sort()).toEqual(oracle.map(key).sort());
        for (const o of oracle) {
          const r = rollups.find((x) => key(x) === key(o))!;
          expect({ key: key(r), n: r.n, requests: r.requests, success: r.successRate, mean: r.outcomeMean.toFixed(9) }).toEqual({
            key: key(o),
            n: o.n,
            requests: o.requests,
            success: o.successRate,
            mean: o.outcomeMean.toFixed(9),
          });
          for (const q of ['latencyP50Ms', 'latencyP90Ms', 'latencyP99Ms'] as const) expect(Math.abs(r[q]! - o[q]!)).toBeLessThanOrEqual(0.01 * o[q]!);
        }
        // The beat's own table again, for the next steps.
        await repo.recompute(beat);
        return rollups;
      };

      // A change point of m-e two and a half hours ago: its row is built from the hours after it.
      await epoch('m-e', 9_000);
      await repo.recompute(beat);
      expect((await sql.query(`SELECT model FROM rollup_epoch_window`, [])).rows).toEqual([{ model: 'm-e' }]);
      const first = await agrees();
      expect(byModel(first, 'acme', 'm-e')!.requests).toBeLessThan(byModel(first, 'acme', 'm-f')!.requests);

      // Traces of this hour, late ones of an hour after the change and of one before it: the row takes in the first two.
      for (let i = 0; i < 30; i++) {
        await trace(`now-${i}`, 'm-e', 60 + i, spread(i + 11), i % 7 === 0 ? 500 : 200);
        await trace(`late-${i}`, 'm-e', 5_400 + i, spread(i + 5));
        await trace(`early-${i}`, 'm-e', 12_000 + i, 3_000 + i);
      }
      await repo.recompute(beat);
      await agrees();

      // A later change point replaces the row: built again from the hours after it.
      await epoch('m-e', 2_400);
      await repo.recompute(beat);
      const { rows: since } = await sql.query<{ since: Date | string }>(`SELECT since FROM rollup_epoch_window WHERE model = 'm-e'`, []);
      const { rows: latest } = await sql.query<{ since: Date | string }>(`SELECT max(since) AS since FROM learning_epochs WHERE model = 'm-e'`, []);
      expect(new Date(since[0].since)).toEqual(new Date(latest[0].since));
      await agrees();

      // Once the window's start passes the change point, the pair's window is the plain one again.
      await repo.recompute({ ...beat, at: new Date(Date.now() + beat.windowSeconds * 1000 - 1_800_000) });
      expect((await sql.query(`SELECT 1 FROM rollup_epoch_window UNION ALL SELECT 1 FROM rollup_epoch_window_latency`, [])).rows).toEqual([]);
    });
  });
}

/* Each window since a change point against the hour buckets from the first whole hour at or after it: no row differs. */
const EPOCH_WINDOW_VS_HOURS = `
  WITH h AS (
    SELECT c.org_id, c.provider, c.model, sum(h.requests) AS requests, sum(h.ok) AS ok, sum(h.cost_n) AS cost_n, sum(h.cost_sum) AS cost_sum
    FROM rollup_epoch_window c
    JOIN rollup_model_hours h ON h.org_id = c.org_id AND h.provider = c.provider AND h.model = c.model AND h.bucket >= ${bucketCeil('c.since')}
    GROUP BY 1, 2, 3
  ),
  b AS (
    SELECT c.org_id, c.provider, c.model, u.bin, sum(u.n) AS n, sum(u.total) AS total
    FROM rollup_epoch_window c
    JOIN rollup_model_hours h ON h.org_id = c.org_id AND h.provider = c.provider AND h.model = c.model AND h.bucket >= ${bucketCeil('c.since')}
    CROSS JOIN LATERAL unnest(h.latency_bins, h.latency_n, h.latency_sum) AS u (bin, n, total)
    GROUP BY 1, 2, 3, 4
  )
  SELECT 'scalar' AS what, c.model FROM rollup_epoch_window c
  LEFT JOIN h ON h.org_id = c.org_id AND h.provider = c.provider AND h.model = c.model
  WHERE c.requests <> COALESCE(h.requests, 0) OR c.ok <> COALESCE(h.ok, 0) OR c.cost_n <> COALESCE(h.cost_n, 0) OR c.cost_sum <> COALESCE(h.cost_sum, 0)
  UNION ALL
  SELECT 'latency bin', COALESCE(l.model, b.model)
  FROM (SELECT * FROM rollup_epoch_window_latency WHERE n <> 0) l
  FULL JOIN b ON b.org_id = l.org_id AND b.provider = l.provider AND b.model = l.model AND b.bin = l.bin
  WHERE l.n IS DISTINCT FROM b.n OR l.total IS DISTINCT FROM b.total
  UNION ALL
  SELECT 'count', NULL WHERE (SELECT count(*) FROM rollup_epoch_window) = 0`;

async function expectEpochWindowIsItsHours(sql: SqlExecutor): Promise<void> {
  expect((await sql.query(EPOCH_WINDOW_VS_HOURS, [])).rows).toEqual([]);
}
