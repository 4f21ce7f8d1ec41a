/**
 * What a beat of the rollups leaves in the embedded store's memory (docs/architecture.md "Statistics
 * are derived, never accumulated"), for a developer's check: not a test, it asserts nothing; the file
 * name (`*.bench.ts`) keeps it out of `npm test`. Run:
 *
 *   npx jest --config jest.config.js --testMatch '<rootDir>/bench/beat-memory.bench.ts' --runInBand
 *
 * PGlite in this process on a data dir on disk (as the gateway's store, whose worker thread runs the
 * same WebAssembly), migrated, one active experiment. Then BEAT_MEMORY_ROUNDS (default 3) rounds,
 * each: BEAT_MEMORY_TRACES (default 70,000, a minute of a busy gateway) new traces, a twentieth
 * with a failed attempt, a fiftieth failed, half of them in the experiment; then the learning
 * beat (`ModelStatsRepository.recompute`, with the change detector unless BEAT_MEMORY_DRIFT=0) and
 * the stop rules' read (`ExperimentStatsRepository.armStats`), each timed, with the pages of the
 * store's WebAssembly memory touched before and after (Linux: the present pages of its mapping in
 * /proc/self/pagemap; the process's RSS would mostly show this thread's own JavaScript heap).
 * That memory is never given back, so what a beat grows stays: the first round's growth is what
 * the busiest beat costs a gateway for good.
 */
import { closeSync, mkdtempSync, openSync, readFileSync, readSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ExperimentStatsRepository } from '../src/experiments/experiment-stats.repository';
import { ModelStatsRepository } from '../src/learning/model-stats.repository';
import { ANALYTICS_MIGRATIONS, runMigrations } from '../src/stores/sql/migrator';
import { PgliteSqlStore } from '../src/stores/sql/pglite-sql.store';

const TRACES = Number(process.env.BEAT_MEMORY_TRACES ?? 70_000);
const ROUNDS = Number(process.env.BEAT_MEMORY_ROUNDS ?? 3);
/* The change detector runs in the beat as the aggregation job runs it; BEAT_MEMORY_DRIFT=0 leaves it out (the rollups alone). */
const DRIFT = process.env.BEAT_MEMORY_DRIFT !== '0';
const PARAMS = { windowSeconds: 30 * 86_400, weights: { score: 0.6, useful: 0.4 }, drift: DRIFT ? { latencyTargetMs: 2_000 } : undefined };

/* $1 first, $2 last, $3 the experiment: traces of now, in 500-row statements as the trace writer writes them. */
const NEW_TRACES = `
  INSERT INTO decision_traces (request_id, org_id, api_key_id, endpoint, requested_model, selected_provider, selected_model,
                               status, latency_ms, cost_usd, failed_attempts, experiment_id, experiment_arm)
  SELECT 'beat-' || g, 'bench', 'k', 'chat', 'auto', 'p1', CASE WHEN g % 2 = 0 THEN 'm-a' ELSE 'm-b' END,
         CASE WHEN g % 50 = 0 THEN 502 ELSE 200 END, 1 + (g % 97) * 0.37, 0.0001,
         CASE WHEN g % 20 = 0 THEN '[{"provider": "p1", "model": "m-c", "error": "status", "status": 503}]'::jsonb END,
         CASE WHEN g % 4 < 2 THEN $3::uuid END, CASE WHEN g % 4 = 0 THEN 'baseline' WHEN g % 4 = 1 THEN 'candidate' END
  FROM generate_series($1::bigint, $2::bigint) AS g`;

/** MiB of `memory` (a WebAssembly memory's buffer) the process has touched: its mapping's present pages. */
function touchedMiB(memory: ArrayBuffer): number {
  const size = memory.byteLength;
  const vma = readFileSync('/proc/self/maps', 'utf8')
    .split('\n')
    .map((l) => /^([0-9a-f]+)-([0-9a-f]+) rw-p 00000000 00:00 0\s*$/.exec(l))
    .find((m) => m !== null && parseInt(m[2], 16) - parseInt(m[1], 16) === size);
  if (!vma) throw new Error(`no mapping of ${size} bytes: which pages the store touched is not readable here`);
  const pages = size / 4096;
  const entries = Buffer.alloc(pages * 8);
  const fd = openSync('/proc/self/pagemap', 'r');
  try {
    readSync(fd, entries, 0, entries.length, (parseInt(vma[1], 16) / 4096) * 8);
  } finally {
    closeSync(fd);
  }
  let present = 0;
  for (let i = 0; i < pages; i++) if (entries[i * 8 + 7] & 0x80) present++;
  return (present * 4096) / 1048576;
}

async function timed(what: string, memory: () => ArrayBuffer, run: () => Promise<unknown>): Promise<string> {
  const before = touchedMiB(memory());
  const t0 = process.hrtime.bigint();
  await run();
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  const after = touchedMiB(memory());
  return `${what} ${ms.toFixed(0)} ms, store memory touched ${before.toFixed(1)} → ${after.toFixed(1)} MiB (${(after - before >= 0 ? '+' : '') + (after - before).toFixed(1)})`;
}

jest.setTimeout(30 * 60_000);

it(`a beat over ${TRACES} new traces, ${ROUNDS} rounds: the store's memory before and after`, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'beat-memory-'));
  const store = await PgliteSqlStore.create({ dataDir: dir });
  try {
    await runMigrations(store, ANALYTICS_MIGRATIONS);
    await store.query(`INSERT INTO organizations (id, name, plan) VALUES ('bench', 'bench', 'pro')`, []);
    const { rows } = await store.query<{ id: string; started_at: Date }>(
      `INSERT INTO experiments (org_id, type, status, traffic_pct, baseline_provider, baseline_model, candidate_provider, candidate_model, min_n, max_regression, started_at)
       VALUES ('bench', 'canary', 'active', 50, 'p1', 'm-a', 'p1', 'm-b', 1000, 0.05, now() - interval '1 minute') RETURNING id, started_at`,
      [],
    );
    const experiment = { id: rows[0].id, orgId: 'bench', startedAt: new Date(rows[0].started_at), createdAt: new Date(rows[0].started_at) };
    const learning = new ModelStatsRepository(store);
    const stops = new ExperimentStatsRepository(store);
    const memory = () => (store.db.Module as unknown as { HEAPU8: Uint8Array }).HEAPU8.buffer as ArrayBuffer;
    await learning.recompute(PARAMS);
    await stops.armStats(experiment);
    const lines: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      for (let i = 0; i < TRACES; i += 500) await store.query(NEW_TRACES, [round * TRACES + i, round * TRACES + Math.min(i + 500, TRACES) - 1, experiment.id]);
      lines.push(`round ${round + 1}: ${await timed('learning beat', memory, () => learning.recompute(PARAMS))}; ${await timed('stop rules', memory, () => stops.armStats(experiment))}`);
    }
    process.stdout.write(`\n${lines.join('\n')}\n`);
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
