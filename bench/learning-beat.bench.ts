/**
 * A quick measurement of the learning loop's beat on the rollups (docs/architecture.md "Statistics
 * are derived, never accumulated"), for a developer's check: not a test, it asserts nothing; the
 * file name (`*.bench.ts`) keeps it out of `npm test`. Run:
 *
 *   npx jest --config jest.config.js --testMatch '<rootDir>/bench/learning-beat.bench.ts' --runInBand
 *
 * It loads LEARNING_BEAT_TRACES traces (default 1,000,000) spread over the 30-day window, and answers
 * for a third of their sessions, into a throwaway Postgres 15 on loopback (or the database of
 * LEARNING_BEAT_DATABASE_URL, which it empties), lets the first beats take them in (the backfill),
 * then times LEARNING_BEAT_ROUNDS (default 20) steady beats, each after 1,000 new traces (a tenth of
 * them late, up to the whole window old) and 300 answers (new and changed). It also times the full
 * recompute once over the same data. The beat it times is `ModelStatsRepository.recompute` (what the
 * aggregation job runs); the stop rules' and the detector's reads bring the same rollups up to date
 * the same way.
 */
import { ModelStatsRepository } from '../src/learning/model-stats.repository';
import { ANALYTICS_MIGRATIONS, runMigrations } from '../src/stores/sql/migrator';
import { PgSqlStore } from '../src/stores/sql/pg-sql.store';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { startPostgres } = require('../scripts/test-servers.js') as { startPostgres: () => Promise<{ url: string; stop(): void; skipped?: string }> };

const TRACES = Number(process.env.LEARNING_BEAT_TRACES ?? 1_000_000);
const ROUNDS = Number(process.env.LEARNING_BEAT_ROUNDS ?? 20);
const PARAMS = { windowSeconds: 30 * 86_400, weights: { score: 0.6, useful: 0.4 } };
const LOAD_BATCH = 250_000;

/*
 * Server-side generation: 5 organisations, 18 pairs, 4 traces per session, spread over 30 days. $1
 * first, $2 last. A random() meant per row sits in a subquery of the row, never in an uncorrelated
 * LATERAL, which Postgres evaluates once.
 */
const LOAD_TRACES = `
  INSERT INTO decision_traces (request_id, org_id, api_key_id, session_id, endpoint, requested_model, selected_provider, selected_model,
                               status, latency_ms, cost_usd, created_at, failed_attempts)
  SELECT 'load-' || g, 'org' || (s % 5), 'k', 'sess-' || s, CASE WHEN g % 10 = 0 THEN 'embeddings' ELSE 'chat' END, 'auto',
         'p' || (s * 7 % 3), 'm' || (s * 7 % 6), CASE WHEN g % 20 = 0 THEN 502 ELSE 200 END,
         exp(3 + random() * 6), CASE WHEN random() < 0.8 THEN random() * 0.01 END,
         now() - random() * interval '30 days',
         CASE WHEN g % 25 = 0 THEN '[{"provider": "p1", "model": "m1", "error": "status", "status": 503}]'::jsonb END
  FROM generate_series($1::bigint, $2::bigint) AS g, LATERAL (SELECT g / 4 AS s) AS x`;

const LOAD_FEEDBACK = `
  INSERT INTO feedback (org_id, session_id, score, useful, created_at, updated_at)
  SELECT 'org' || (s % 5), 'sess-' || s, floor(random() * 11)::int, random() < 0.6, t, t
  FROM (SELECT s, now() - random() * interval '29 days' AS t FROM generate_series(0, $1::bigint) AS s WHERE s % 3 = 0) AS x
  ON CONFLICT DO NOTHING`;

/* A steady beat's arrivals: $1 a round number; 1,000 traces, a tenth late. */
const NEW_TRACES = `
  INSERT INTO decision_traces (request_id, org_id, api_key_id, session_id, endpoint, requested_model, selected_provider, selected_model,
                               status, latency_ms, cost_usd, created_at)
  SELECT 'new-' || $1 || '-' || g, 'org' || (s % 5), 'k', 'sess-' || s, 'chat', 'auto', 'p' || (s * 7 % 3), 'm' || (s * 7 % 6),
         CASE WHEN g % 20 = 0 THEN 502 ELSE 200 END, exp(3 + random() * 6), random() * 0.01,
         CASE WHEN g % 10 = 0 THEN now() - random() * interval '30 days' ELSE now() - random() * interval '1 minute' END
  FROM (SELECT g, floor(random() * $2::float8)::bigint AS s FROM generate_series(1, 1000) AS g) AS x`;

const NEW_ANSWERS = `
  INSERT INTO feedback (org_id, session_id, score, useful)
  SELECT DISTINCT ON (s) 'org' || (s % 5), 'sess-' || s, floor(random() * 11)::int, random() < 0.6
  FROM (SELECT floor(random() * $1::float8)::bigint AS s FROM generate_series(1, 300) AS g) AS x
  ON CONFLICT (org_id, session_id) DO UPDATE SET score = EXCLUDED.score, useful = EXCLUDED.useful, updated_at = now()`;

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil(p * xs.length) - 1)];

it(`learning beat over ${TRACES.toLocaleString('en')} traces`, async () => {
  const server = process.env.LEARNING_BEAT_DATABASE_URL ? null : await startPostgres();
  if (server?.skipped) throw new Error(`no Postgres: ${server.skipped}`);
  const url = process.env.LEARNING_BEAT_DATABASE_URL ?? server!.url;
  // Loading and the full recompute need more than the gateway's 5 s per statement.
  const admin = new PgSqlStore(url, { statementTimeoutMs: 600_000 });
  const store = new PgSqlStore(url);
  try {
    await runMigrations(admin, ANALYTICS_MIGRATIONS);
    await admin.query(
      `TRUNCATE decision_traces, feedback, model_stats, rollup_state, rollup_model_hours, rollup_sample_hours, rollup_session_pairs,
                rollup_window, rollup_window_latency`,
      [],
    );
    let t = Date.now();
    for (let first = 0; first < TRACES; first += LOAD_BATCH) await admin.query(LOAD_TRACES, [first, Math.min(TRACES, first + LOAD_BATCH) - 1]);
    await admin.query(LOAD_FEEDBACK, [Math.floor(TRACES / 4)]);
    await admin.query('VACUUM ANALYZE decision_traces', []);
    await admin.query('VACUUM ANALYZE feedback', []);
    console.log(`loaded ${TRACES} traces in ${Date.now() - t} ms`);

    const repo = new ModelStatsRepository(store);
    t = Date.now();
    let backfillBeats = 0;
    for (;;) {
      await repo.recompute({ ...PARAMS, backfill: { budgetMs: 10_000 } });
      backfillBeats++;
      const { rows } = await store.query<{ pending: boolean }>(`SELECT backfill_txid IS NOT NULL AS pending FROM rollup_state WHERE name = 'learning'`, []);
      if (!rows[0].pending) break;
    }
    console.log(`backfill: ${backfillBeats} beats, ${Date.now() - t} ms`);
    await admin.query('VACUUM ANALYZE', []);

    const sessions = Math.floor(TRACES / 4);
    const beats: number[] = [];
    const empty: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      await store.query(NEW_TRACES, [round, sessions]);
      await store.query(NEW_ANSWERS, [sessions]);
      t = performance.now();
      await repo.recompute(PARAMS);
      beats.push(performance.now() - t);
      t = performance.now();
      await repo.recompute(PARAMS);
      empty.push(performance.now() - t);
    }
    const ms = (x: number) => `${x.toFixed(1)} ms`;
    console.log(`steady beat (1,000 traces + 300 answers): p50 ${ms(pct(beats, 0.5))}, p99 ${ms(pct(beats, 0.99))}, max ${ms(Math.max(...beats))}`);
    console.log(`beat with nothing new: p50 ${ms(pct(empty, 0.5))}, max ${ms(Math.max(...empty))}`);

    t = Date.now();
    await new ModelStatsRepository(admin).recomputeFromTraces(PARAMS);
    console.log(`full recompute (the oracle) over the same data: ${Date.now() - t} ms`);
    const sizes = await admin.query<{ relname: string; size: string }>(
      `SELECT relname, pg_size_pretty(pg_total_relation_size(oid)) AS size FROM pg_class
       WHERE relkind IN ('r', 'p') AND (relname LIKE 'rollup_%' OR relname LIKE 'decision_traces%' OR relname = 'feedback') ORDER BY relname`,
      [],
    );
    console.log(sizes.rows.map((r) => `${r.relname} ${r.size}`).join('\n'));
  } finally {
    await Promise.all([admin.close(), store.close()]);
    server?.stop();
  }
}, 3_600_000);
