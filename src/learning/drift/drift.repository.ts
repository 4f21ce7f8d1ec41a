import type { SqlExecutor } from '../../stores/sql/sql-store';
import { BEAT_WORK_MEM, bucketOf, samePair, traceCalls } from '../rollups/rollup-state';
import { Alarm, CusumParams, CusumState, hold, initialState, step } from './cusum';

/**
 * The change detector (README "Drift: change detection"), run by the learning beat inside its
 * transaction, after the rollups took in what arrived (model-stats.repository.ts `recompute`).
 *
 * Two streams per (organisation, provider, model), each with its own CUSUM (cusum.ts):
 *
 *   outcome  one sample per (session, pair) when the session's first answer and a successful chat
 *            trace of the pair both exist: y = w_s·(score/10) + w_u·useful, the learning outcome. A
 *            later change of the answer does not feed it again (it would count the session twice);
 *            the rollups' statistics still follow the answer as it stands. The samples wait in
 *            drift_queue, where the rollups put each when it first exists; a step takes them off it
 *            in the statement that reads them. Their order: when each entered
 *            (the earlier of the pair's last trace and the answer, as the rollups' buckets), then
 *            session id.
 *   auto     one sample per request (decision trace naming the pair, or a failed attempt naming
 *            it): 0 when it failed, else min(1, routing.latency_target_ms / latency), the `auto`
 *            signal's per-request form. The traces whose txid lies in [drift_state.txid_done,
 *            rollup txid_done), in txid order: those the rollups took in since the detector's last
 *            step (rollup-state.ts says why a txid range misses no committed row), fetched through a
 *            cursor REQUEST_CHUNK at a time.
 *
 * Everything is written in the beat's transaction (the test states, the watermark, the queue, the
 * change points, the regressions): a beat that fails adds nothing, and one that commits has taken
 * each sample in exactly once, on whichever replica ran it.
 *
 * An alarm records a change point in learning_epochs (the learning window of that pair then starts
 * there, REWRITE in model-stats.repository.ts) and, for a drop, a regression (reason
 * `change_detected`) that routing's penalty and explain's evidence show.
 */

/**
 * The test's parameters, calibrated by bench/drift-calibration.bench.ts (README "Drift: change detection").
 * The held test's: each hold of an unchanged model costs the answers routing serves it until the test
 * says "as before", and the learning benchmark's rise is large (5.8/0.50 → 9.4/0.95, about 1.5
 * standard deviations of the outcome). kHeld 0.75 (the half of that shift) with hHeld 4 and holdEnd 1
 * ends an unchanged model's hold after 2.8 answers on average (hHeld 10, holdEnd 3, kHeld 0.5 and a
 * margin of 0.5 took 7.5) and finds the rise after a median of 9 answers (19), in 284 of 400 holds
 * (292), with as many false rises (8 of 400); the margin is then not needed (0.5 with these bounds
 * lost a fifth of the rises and saved a third to a half of the false ones).
 */
export const DRIFT_CUSUM: CusumParams = {
  k: 0.25,
  h: 25,
  warmup: 20,
  zClamp: 3,
  sdFloor: 0.05,
  memory: 2_000,
  priorSd: 0.2,
  priorDf: 5,
  kHeld: 0.75,
  hHeld: 4,
  holdEnd: 1,
  holdMargin: 0,
  holdMax: 40,
};

export type Stream = 'outcome' | 'auto';

/** Samples one step takes in at most (NEW_SAMPLES); a backlog is fed over the next beats. */
export const FEED_BATCH = 20_000;

/**
 * Requests per fetch of the request stream (REQUESTS, through a cursor): a beat of a busy embedded
 * gateway is a minute of traces, 100,000–300,000 rows. As one result that held ≈ 250 MB of
 * JavaScript heap for a moment and grew the embedded database's WebAssembly memory and the
 * process's malloc heap by tens of MiB that they never give back (the soak benchmark's growth at
 * rest). Through a cursor the statement still runs once (one scan of the traces, one sort), and
 * what crosses to JavaScript comes this many rows at a time. (Reading the range in pieces by txid
 * instead scanned today's partition once per piece: its BRIN ranges have no summary until the day
 * is sealed, docs/architecture.md "Statistics are derived, never accumulated".)
 */
export const REQUEST_CHUNK = 10_000;

export interface DriftParams {
  weights: { score: number; useful: number };
  /** routing.latency_target_ms: the latency at which the auto signal starts to fall. */
  latencyTargetMs: number;
  cusum?: CusumParams;
  /**
   * routing.retry_starved's gap (after_requests, after_seconds): a pair that served none of its
   * organisation's last `requests` requests, or none for `seconds`, was starved, and its next
   * request is a re-try; its outcome test then holds its reference (cusum.ts). Absent: no holds.
   */
  starvedAfter?: { requests: number; seconds: number };
  /** At most this many samples per step (default FEED_BATCH; the tests shrink it). */
  feedBatch?: number;
  /** Requests per fetch of the request stream (default REQUEST_CHUNK; the tests shrink it). */
  requestChunk?: number;
}

export interface ChangeFound extends Alarm {
  orgId: string;
  provider: string;
  model: string;
  stream: Stream;
}

/** The detector's row in drift_state (its watermark); the learning rollups' backfill reads whether it exists. */
export const DRIFT_STATE_NAME = 'drift';
const NAME = DRIFT_STATE_NAME;

const READ_STATE = `
  SELECT d.txid_done::text AS drift_txid, r.txid_done::text AS rollup_txid
  FROM (SELECT 1) one
  LEFT JOIN drift_state d ON d.name = $1
  LEFT JOIN rollup_state r ON r.name = 'learning'`;

const WRITE_STATE = `
  INSERT INTO drift_state (name, txid_done, updated_at) VALUES ($1, $2::bigint, now())
  ON CONFLICT (name) DO UPDATE SET txid_done = EXCLUDED.txid_done, updated_at = EXCLUDED.updated_at`;

/* A rebuild's start: the request stream resumes after what the rebuild takes in as history. */
const SKIP_HISTORY = `UPDATE drift_state SET txid_done = GREATEST(txid_done, $2::bigint), updated_at = now() WHERE name = $1`;

/*
 * The requests of the traces in [$1, $2), in the order they were written (txid, time, id; a trace's
 * failed attempts before the call that served it): the pair that served (ok or not) and each failed
 * attempt. Each trace is read once, through the list of its calls (`traceCalls`), and only what the
 * tests take goes out (`at`: created_at in epoch milliseconds, what a Date holds): a beat of a busy
 * gateway reads tens of thousands (docs/architecture.md "Statistics are derived, never accumulated").
 */
const REQUESTS = `
  SELECT t.org_id, x.provider, x.model, x.ok, x.latency_ms, floor(extract(epoch FROM t.created_at) * 1000)::float8 AS at
  FROM decision_traces t CROSS JOIN LATERAL ${traceCalls('t')} AS x
  WHERE t.txid >= $1::bigint AND t.txid < $2::bigint AND x.provider IS NOT NULL AND x.model IS NOT NULL
  ORDER BY t.txid, t.created_at, t.id, x.k`;

/*
 * The next samples, at most $1 of them (the oldest traces first), taken off the detector's queue
 * (drift_queue, where the rollups put each sample when it first exists) in the statement that reads
 * them. Bounded because the first step after the rollups' first backfill finds the whole window's
 * answered sessions waiting (about 90,000 at a million traces: one statement of them all ran past
 * the statement timeout); the rest wait for the next beats. The rows are picked by walking the
 * queue's index in that order and deleted by their ctid (the same snapshot). The sample is the pair
 * as it stands (a pair the window has dropped since is no sample any more).
 */
const NEW_SAMPLES = `
  WITH next AS (
    SELECT ctid FROM drift_queue
    ORDER BY last_trace_at, session_id, provider, model
    LIMIT $1
  ),
  fed AS (
    DELETE FROM drift_queue q
    WHERE q.ctid = ANY (ARRAY(SELECT ctid FROM next))
    RETURNING q.org_id, q.session_id, q.provider, q.model
  )
  SELECT p.org_id, p.session_id, p.provider, p.model, p.score, p.useful,
         LEAST(p.last_trace_at, COALESCE(f.updated_at, p.last_trace_at)) AS entered
  FROM fed
  JOIN LATERAL (
    SELECT p.org_id, p.session_id, p.provider, p.model, p.score, p.useful, p.last_trace_at FROM rollup_session_pairs p
    WHERE p.org_id = fed.org_id AND p.session_id = fed.session_id AND p.provider = fed.provider AND p.model = fed.model AND p.score IS NOT NULL
    OFFSET 0
  ) p ON true
  LEFT JOIN feedback f ON f.org_id = p.org_id AND f.session_id = p.session_id
  ORDER BY entered, p.session_id, p.provider, p.model`;

const LOAD_DETECTORS = `
  SELECT org_id, provider, model, stream, state, org_requests_at::text AS org_requests_at, last_sample_at
  FROM drift_detectors WHERE org_id = ANY($1::text[])`;

const LOAD_ORG_REQUESTS = `SELECT org_id, requests::text AS requests FROM drift_org_requests WHERE org_id = ANY($1::text[])`;

const SAVE_DETECTOR = `
  INSERT INTO drift_detectors (org_id, provider, model, stream, state, last_sample_at, org_requests_at, updated_at)
  VALUES ($1, $2, $3, $4, $5::jsonb, $6::timestamptz, $7::bigint, now())
  ON CONFLICT (org_id, provider, model, stream) DO UPDATE SET
    state = EXCLUDED.state, last_sample_at = EXCLUDED.last_sample_at, org_requests_at = EXCLUDED.org_requests_at, updated_at = EXCLUDED.updated_at`;

const SAVE_ORG_REQUESTS = `
  INSERT INTO drift_org_requests (org_id, requests) VALUES ($1, $2::bigint)
  ON CONFLICT (org_id) DO UPDATE SET requests = EXCLUDED.requests`;

const INSERT_EPOCH = `
  INSERT INTO learning_epochs (org_id, provider, model, since, direction, stream, detail)
  VALUES ($1, $2, $3, $4::timestamptz, $5, $6, $7::jsonb)`;

const INSERT_REGRESSION = `INSERT INTO regressions (org_id, provider, model, reason, detail) VALUES ($1, $2, $3, 'change_detected', $4::jsonb)`;

interface RequestRow {
  org_id: string;
  provider: string;
  model: string;
  ok: boolean;
  latency_ms: number | null;
  /** created_at in epoch milliseconds. */
  at: number;
}

interface SampleRow {
  org_id: string;
  provider: string;
  model: string;
  score: number;
  useful: boolean;
  entered: Date | string;
}

interface DetectorRow {
  org_id: string;
  provider: string;
  model: string;
  stream: Stream;
  state: CusumState | string;
  org_requests_at: string;
  last_sample_at: Date | string | null;
}

interface Detector {
  orgId: string;
  provider: string;
  model: string;
  stream: Stream;
  state: CusumState;
  lastSampleAt: Date | null;
  orgRequestsAt: bigint;
  dirty: boolean;
}

const keyOf = (orgId: string, provider: string, model: string, stream: Stream) => `${orgId}\u0000${provider}\u0000${model}\u0000${stream}`;

/** The auto signal of one request: 0 failed, else min(1, target / latency) (1 when the latency is unknown or 0). */
export function autoSample(ok: boolean, latencyMs: number | null, targetMs: number): number {
  if (!ok) return 0;
  return latencyMs === null || latencyMs <= 0 ? 1 : Math.min(1, targetMs / latencyMs);
}

export class DriftRepository {
  /**
   * One step of every test, in the caller's transaction, which holds the rollups' lock (their
   * catchUp ran in it): the samples the beat took in since the last step. Returns the changes found.
   */
  /**
   * The learning rollups are being rebuilt from the traces (a backfill of everything below `txid`):
   * those traces are history to the tests, as the samples the backfill finds are (it marks them
   * fed), so the request stream continues from `txid` rather than reading them all at the rebuild's
   * end (after a bulk import that was millions of rows in one statement).
   */
  async skipHistory(tx: SqlExecutor, txid: string): Promise<void> {
    await tx.query(SKIP_HISTORY, [NAME, txid]);
  }

  async step(tx: SqlExecutor, p: DriftParams): Promise<ChangeFound[]> {
    const cusum = p.cusum ?? DRIFT_CUSUM;
    const { rows: st } = await tx.query<{ drift_txid: string | null; rollup_txid: string | null }>(READ_STATE, [NAME]);
    const rollupTxid = st[0]?.rollup_txid ?? null;
    if (rollupTxid === null) return [];
    // The first step starts at the rollups' watermark: traces from before the tests existed are not replayed.
    const from = st[0].drift_txid ?? rollupTxid;
    const readRequests = BigInt(from) < BigInt(rollupTxid);
    const samples = (await tx.query<SampleRow>(NEW_SAMPLES, [p.feedBatch ?? FEED_BATCH])).rows;
    await tx.query(WRITE_STATE, [NAME, rollupTxid]);
    if (!readRequests && samples.length === 0) return [];

    const detectors = new Map<string, Detector>();
    const orgRequests = new Map<string, bigint>();
    /** The tests and request counts of the organisations not met before in this step. */
    const load = async (orgIds: Iterable<string>) => {
      const orgs = [...new Set(orgIds)].filter((o) => !orgRequests.has(o));
      if (orgs.length === 0) return;
      for (const o of orgs) orgRequests.set(o, 0n);
      for (const r of (await tx.query<DetectorRow>(LOAD_DETECTORS, [orgs])).rows) {
        detectors.set(keyOf(r.org_id, r.provider, r.model, r.stream), {
          orgId: r.org_id,
          provider: r.provider,
          model: r.model,
          stream: r.stream,
          state: typeof r.state === 'string' ? (JSON.parse(r.state) as CusumState) : r.state,
          lastSampleAt: r.last_sample_at === null ? null : new Date(r.last_sample_at),
          orgRequestsAt: BigInt(r.org_requests_at),
          dirty: false,
        });
      }
      for (const r of (await tx.query<{ org_id: string; requests: string }>(LOAD_ORG_REQUESTS, [orgs])).rows) orgRequests.set(r.org_id, BigInt(r.requests));
    };

    const detector = (orgId: string, provider: string, model: string, stream: Stream): Detector => {
      const k = keyOf(orgId, provider, model, stream);
      let d = detectors.get(k);
      if (!d) {
        d = { orgId, provider, model, stream, state: initialState(), lastSampleAt: null, orgRequestsAt: 0n, dirty: true };
        detectors.set(k, d);
      }
      d.dirty = true;
      return d;
    };
    const found: ChangeFound[] = [];
    const feed = (d: Detector, x: number, at: Date) => {
      const alarm = step(d.state, x, at.getTime(), cusum);
      if (!d.lastSampleAt || at > d.lastSampleAt) d.lastSampleAt = at;
      if (alarm) found.push({ ...alarm, orgId: d.orgId, provider: d.provider, model: d.model, stream: d.stream });
    };

    const takeRequest = (r: RequestRow) => {
      const count = (orgRequests.get(r.org_id) ?? 0n) + 1n;
      orgRequests.set(r.org_id, count);
      const d = detector(r.org_id, r.provider, r.model, 'auto');
      const at = new Date(r.at);
      if (p.starvedAfter && d.orgRequestsAt > 0n && d.lastSampleAt) {
        const starved = count - d.orgRequestsAt > BigInt(p.starvedAfter.requests) || at.getTime() - d.lastSampleAt.getTime() >= p.starvedAfter.seconds * 1000;
        const outcome = starved ? detectors.get(keyOf(r.org_id, r.provider, r.model, 'outcome')) : undefined;
        if (outcome) {
          // A re-try of a model routing starved: its answers are tested against what it was (cusum.ts "Held").
          hold(outcome.state);
          outcome.dirty = true;
        }
      }
      d.orgRequestsAt = count;
      feed(d, autoSample(r.ok, r.latency_ms === null ? null : Number(r.latency_ms), p.latencyTargetMs), at);
    };
    if (readRequests) {
      const chunk = Math.max(1, Math.floor(p.requestChunk ?? REQUEST_CHUNK));
      // Its sort spills to a file past the server's default work memory (Postgres's 4 MB unless an
      // operator set another), instead of growing the embedded store's WebAssembly memory by the
      // beat's requests (a beat over 70,000 traces: +6.8 → +3.4 MiB that is never given back); the
      // beat's own setting again afterwards.
      await tx.query('SET LOCAL work_mem TO DEFAULT', []);
      await tx.query(`DECLARE drift_requests NO SCROLL CURSOR FOR ${REQUESTS}`, [from, rollupTxid]);
      for (;;) {
        const requests = (await tx.query<RequestRow>(`FETCH ${chunk} FROM drift_requests`, [])).rows;
        await load(requests.map((r) => r.org_id));
        for (const r of requests) takeRequest(r);
        if (requests.length < chunk) break;
      }
      await tx.query('CLOSE drift_requests', []);
      await tx.query(`SET LOCAL work_mem = '${BEAT_WORK_MEM}'`, []);
    }
    await load(samples.map((s) => s.org_id));
    const a = p.weights.score / 10;
    for (const s of samples) {
      feed(detector(s.org_id, s.provider, s.model, 'outcome'), a * Number(s.score) + p.weights.useful * (s.useful ? 1 : 0), new Date(s.entered));
    }

    for (const d of detectors.values()) {
      if (!d.dirty) continue;
      await tx.query(SAVE_DETECTOR, [d.orgId, d.provider, d.model, d.stream, JSON.stringify(d.state), d.lastSampleAt?.toISOString() ?? null, d.orgRequestsAt.toString()]);
    }
    for (const [org, n] of orgRequests) await tx.query(SAVE_ORG_REQUESTS, [org, n.toString()]);
    for (const c of found) {
      const detail = { stream: c.stream, direction: c.direction, since: new Date(c.since).toISOString(), samples: c.samples, before: c.before, after: c.after, statistic: c.statistic };
      await tx.query(INSERT_EPOCH, [c.orgId, c.provider, c.model, new Date(c.since).toISOString(), c.direction, c.stream, JSON.stringify(detail)]);
      if (c.direction === 'drop') await tx.query(INSERT_REGRESSION, [c.orgId, c.provider, c.model, JSON.stringify(detail)]);
    }
    return found;
  }
}

/*
 * The learning window with change points (README "Drift: change detection"): CTEs, to follow a WITH,
 * that give
 *   ep  the latest change point of each pair that falls inside the window (since > $start),
 *   w   rollup_window's rows, but for a pair of ep its figures from the change point on: samples
 *       that entered at or after `since` (the buckets after its hour, and the rows of that hour's
 *       bucket that entered after it: rollup_session_pairs holds when each did), requests and latencies
 *       from the first whole hour at or after it (they are kept by hour only; rollup_epoch_window
 *       holds their sums, LearningRollups.syncEpochWindows keeps it in line with ep);
 *   wl  rollup_window_latency's rows, likewise (rollup_epoch_window_latency).
 * `start`: the SQL of the window start (a whole hour). What the full recompute does from the raw rows
 * (model-stats.repository.ts RECOMPUTE) is the same definition.
 */
export function epochWindowSql(start: string): string {
  return `${latestEpochsSql(start)},
  ep_hours AS (
    SELECT c.org_id, c.provider, c.model, c.requests, c.ok, c.cost_n, c.cost_sum
    FROM ep e JOIN rollup_epoch_window c ON ${samePair('c', 'e')} AND c.since = e.since
  ),
  ep_samples AS (
    SELECT org_id, provider, model, sum(n) AS n, sum(score_sum) AS score_sum, sum(score_sq_sum) AS score_sq_sum, sum(useful_sum) AS useful_sum,
           sum(score_useful_sum) AS score_useful_sum, sum(nps_detractors) AS nps_detractors, sum(nps_passives) AS nps_passives,
           sum(nps_promoters) AS nps_promoters
    FROM (
      SELECT e.org_id, e.provider, e.model, s.n, s.score_sum, s.score_sq_sum, s.useful_sum, s.score_useful_sum, s.nps_detractors, s.nps_passives, s.nps_promoters
      FROM ep e JOIN rollup_sample_hours s ON ${samePair('s', 'e')} AND s.bucket > ${bucketOf('e.since')}
      UNION ALL
      SELECT e.org_id, e.provider, e.model, 1, p.score, p.score * p.score, p.useful::int, p.score * p.useful::int,
             (p.score <= 6)::int, (p.score BETWEEN 7 AND 8)::int, (p.score >= 9)::int
      FROM ep e
      JOIN rollup_session_pairs p ON ${samePair('p', 'e')} AND p.bucket = ${bucketOf('e.since')} AND p.score IS NOT NULL
      JOIN feedback f ON f.org_id = p.org_id AND f.session_id = p.session_id
      WHERE LEAST(p.last_trace_at, f.updated_at) >= e.since
    ) x
    GROUP BY 1, 2, 3
  ),
  w AS (
    SELECT r.org_id, r.provider, r.model, r.requests, r.ok, r.cost_n, r.cost_sum, r.n, r.score_sum, r.score_sq_sum, r.useful_sum, r.score_useful_sum,
           r.nps_detractors, r.nps_passives, r.nps_promoters
    FROM rollup_window r
    WHERE r.requests > 0 AND NOT EXISTS (SELECT 1 FROM ep e WHERE ${samePair('e', 'r')})
    UNION ALL
    SELECT e.org_id, e.provider, e.model, COALESCE(h.requests, 0), COALESCE(h.ok, 0), COALESCE(h.cost_n, 0), COALESCE(h.cost_sum, 0),
           COALESCE(s.n, 0), COALESCE(s.score_sum, 0), COALESCE(s.score_sq_sum, 0), COALESCE(s.useful_sum, 0), COALESCE(s.score_useful_sum, 0),
           COALESCE(s.nps_detractors, 0), COALESCE(s.nps_passives, 0), COALESCE(s.nps_promoters, 0)
    FROM ep e
    LEFT JOIN ep_hours h ON ${samePair('h', 'e')}
    LEFT JOIN ep_samples s ON ${samePair('s', 'e')}
    WHERE COALESCE(h.requests, 0) > 0 OR COALESCE(s.n, 0) > 0
  ),
  wl AS (
    SELECT r.org_id, r.provider, r.model, r.bin, r.n, r.total
    FROM rollup_window_latency r
    WHERE r.n > 0 AND NOT EXISTS (SELECT 1 FROM ep e WHERE ${samePair('e', 'r')})
    UNION ALL
    SELECT c.org_id, c.provider, c.model, c.bin, c.n, c.total
    FROM ep e
    JOIN rollup_epoch_window_latency c ON ${samePair('c', 'e')}
    WHERE c.n > 0
  )`;
}

/** SQL CTE `ep`: the latest change point of each pair after `start` (the window's start). */
export function latestEpochsSql(start: string): string {
  return `
  ep AS (
    SELECT DISTINCT ON (org_id, provider, model) org_id, provider, model, since
    FROM learning_epochs WHERE since > ${start}
    ORDER BY org_id, provider, model, since DESC
  )`;
}
