/**
 * `npm run bench:routing`: the learning benchmark (README "Learning (`npm run bench:routing`)"). A benchmark,
 * not a test: it runs under jest only because jest already transforms TypeScript and PGlite here;
 * the file name (`*.bench.ts`) keeps it out of `npm test`'s testMatch. It asserts nothing.
 *
 * A few simulated models with known quality (an NPS-like 0–10 score distribution and a useful rate),
 * cost and latency. Sessions arrive in beats of BEAT sessions; each session is routed in-process by
 * the real RoutingService (live mode, seeded RNG), a decision trace is written to `decision_traces`
 * with the chosen pair's latency and cost, and the user's feedback (score, useful) is written to
 * `feedback` one beat later (late), for only some sessions, and some of it random (noisy). The real
 * AggregationJob runs at the end of every beat (recompute `model_stats` on a migrated in-memory
 * PGlite, refresh the StatsSnapshot the router reads).
 *
 * Policies, each on its own fresh database, over the same simulated users (common random numbers:
 * session i's draws are the same whatever model serves it):
 *   feedback_driven  the gateway's router (Thompson sampling over LearnedScorer's posterior, with
 *                    the decaying exploration of `routing.exploration`, defaults);
 *   epsilon_greedy   ε = 0.1 uniform, else argmax of the same aggregated outcome mean from the
 *                    snapshot (`model_stats.outcome_mean`; the benchmark prior before any feedback);
 *   static_prior     always the highest benchmark prior (`models.<id>.quality`);
 *   smart_cost       the gateway's smart_cost strategy live on its own traffic (it does not explore);
 * plus smart_cost in shadow over feedback_driven's learned stats (what it would pick, per session,
 * given the stats feedback_driven's traffic produced; nothing recorded for it).
 *
 * Regret = Σ over sessions (true mean outcome of the best model − true mean outcome of the chosen),
 * outcome y = 0.6·score/10 + 0.4·useful (the learning job's default weights).
 * Calibration: a feedback_driven dry-run decision each beat (and the live decisions), bucketed by
 * confidence; for confidence ≥ 0.8, how often the chosen model was the true best.
 *
 * Seeds: 60 by default. One seed's regret is mostly luck in the first feedbacks (7 to 85 for
 * feedback_driven, 26 to 114 for epsilon-greedy over seeds 1–60), so the ratio of two 5-seed means moves
 * by ±0.1; the run prints the ratio with a 95 % interval from a paired bootstrap over seeds, and
 * separately for the seeds the defaults of `routing.exploration` were chosen on (1–30, TUNING_SEEDS)
 * and for the held-out ones (31 and up), so a figure that was tuned for is never the only one shown.
 *
 * Drift scenarios (README "Drift: change detection"), feedback_driven alone, DRIFT_SEEDS seeds each:
 * an abrupt drop of the best model, an abrupt rise of a neglected one (both at a session in
 * 900–1,099), a slow decline of the best over sessions 500–1,500, and a control with no change and
 * noisier feedback over 4,000 sessions. Each reports the sessions from the change to the beat that
 * detected it, the sessions until 50 % and 90 % of a window of SHARE_WINDOW sessions is on the new
 * best, the regret against the oracle that knows every model's true outcome at every session, and
 * the false alarms per 10,000 sessions per model; results in bench/results/routing-drift-latest.json.
 *
 * Environment: ROUTING_SIM_SEEDS (default 60), ROUTING_SIM_SESSIONS (default 2000),
 * ROUTING_SIM_SCENARIOS (default `stationary,drop,rise,slow,control`), ROUTING_SIM_DRIFT_SEEDS
 * (default 20), ROUTING_SIM_ROUTING (extra `routing:` keys, e.g. `retry_starved: { enabled: false }`,
 * to compare settings; ROUTING_SIM_DRIFT_WRITE=0 keeps the last drift results); diagnostics only:
 * ROUTING_SIM_POLICIES (comma list, default all four; the others then report no figures, and the
 * run prints regret per seed and per stretch of sessions instead of writing results),
 * ROUTING_SIM_FIRST_SEED (default 1: seeds FIRST … FIRST + SEEDS − 1) and ROUTING_SIM_TRACE=<seed>
 * (print, for that seed's feedback_driven run, each beat's model shares and every candidate's
 * assessment: n, phase, prior, outcome mean, posterior mean ± sd).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import type { Caller } from '../src/common/http/request-context';
import { AppConfig } from '../src/config/app-config';
import { loadEnv } from '../src/config/env';
import { loadGatewayConfig } from '../src/config/gateway-config';
import { AggregationJob } from '../src/learning/aggregation.job';
import { ModelStatsRepository } from '../src/learning/model-stats.repository';
import { StatsSnapshotService } from '../src/learning/stats-snapshot.service';
import { MetricsService } from '../src/metrics/metrics.service';
import { StoreFallback } from '../src/resilience/store-fallback';
import { RoutingService } from '../src/routing/routing.service';
import { LearnedScorer } from '../src/routing/strategies/learned-score';
import type { RoutingDecision } from '../src/routing/routing.types';
import { mulberry32 } from '../src/routing/strategies/random';
import type { SqlStore } from '../src/stores/sql/sql-store';
import { createTestPglite } from '../test/support/pglite';

const SEEDS = Number(process.env.ROUTING_SIM_SEEDS ?? 60);
/** Seeds 1…TUNING_SEEDS chose routing.exploration's defaults (decay_samples, floor); the rest are held out. */
const TUNING_SEEDS = 30;
const BOOTSTRAP = 10_000;
const SESSIONS = Number(process.env.ROUTING_SIM_SESSIONS ?? 2000);
const BEAT = 25; // sessions between two aggregation runs
const FEEDBACK_DELAY_BEATS = 1; // feedback of beat k is written after beat k + 1's sessions
const FEEDBACK_RATE = 0.7; // share of sessions that give feedback at all
const NOISE_RATE = 0.15; // share of the feedback given at random (score uniform 0–10, useful 50/50)
const SCORE_SD = 1.8; // spread of a model's score distribution (0–10 scale)
const EPSILON = 0.1;
const CHECKPOINTS = [500, 1000, 2000].filter((c) => c <= SESSIONS);
const WINDOW = 250; // "share after N sessions" = share of sessions N − 249 … N
const W_SCORE = 0.6;
const W_USEFUL = 0.4;
const ORG = 'sim';
const ONLY = process.env.ROUTING_SIM_POLICIES ? new Set(process.env.ROUTING_SIM_POLICIES.split(',').map((p) => p.trim())) : null;
const FIRST_SEED = Number(process.env.ROUTING_SIM_FIRST_SEED ?? 1);
const TRACE_SEED = process.env.ROUTING_SIM_TRACE ? Number(process.env.ROUTING_SIM_TRACE) : null;

interface SimModel {
  id: string;
  /** Benchmark prior in the catalogue (`quality`): deliberately wrong for the truly best model. */
  prior: number;
  scoreMean: number;
  usefulRate: number;
  latencyMs: number;
  inPerMtok: number;
  outPerMtok: number;
}

const MODELS: SimModel[] = [
  { id: 'frontier-xl', prior: 0.88, scoreMean: 7.2, usefulRate: 0.68, latencyMs: 1600, inPerMtok: 10, outPerMtok: 30 },
  { id: 'balanced-pro', prior: 0.72, scoreMean: 8.6, usefulRate: 0.86, latencyMs: 900, inPerMtok: 3, outPerMtok: 15 },
  { id: 'budget-mini', prior: 0.62, scoreMean: 8.2, usefulRate: 0.8, latencyMs: 500, inPerMtok: 0.25, outPerMtok: 1.25 },
  { id: 'legacy-7b', prior: 0.66, scoreMean: 5.8, usefulRate: 0.5, latencyMs: 700, inPerMtok: 0.5, outPerMtok: 1.5 },
];

/** The NPS-like score distribution of a model: a normal around scoreMean, discretised to 0…10. */
function scorePmf(mean: number): number[] {
  const pdf = Array.from({ length: 11 }, (_, s) => Math.exp(-((s - mean) ** 2) / (2 * SCORE_SD ** 2)));
  const total = pdf.reduce((a, b) => a + b, 0);
  return pdf.map((p) => p / total);
}
const PMF = MODELS.map((m) => scorePmf(m.scoreMean));
const CDF = PMF.map((p) => p.map((_, i) => p.slice(0, i + 1).reduce((a, b) => a + b, 0)));
const TRUE_SCORE = PMF.map((p) => p.reduce((s, pi, i) => s + pi * i, 0));
/** True mean outcome per model (what regret and "best" are about). */
const TRUE_Y = MODELS.map((m, i) => W_SCORE * (TRUE_SCORE[i] / 10) + W_USEFUL * m.usefulRate);
const BEST = TRUE_Y.indexOf(Math.max(...TRUE_Y));
const PRIOR_BEST = MODELS.map((m) => m.prior).indexOf(Math.max(...MODELS.map((m) => m.prior)));
const idx = (model: string) => MODELS.findIndex((m) => m.id === model);

const PROMPT = 'Summarise the following support conversation and propose a next step. '.repeat(28); // ~2,000 chars ≈ 500 tokens
const MAX_COMPLETION = 400;

const YAML = `
providers:
  mock: { family: mock }
models:
${MODELS.map((m) => `  ${m.id}: { provider: mock, type: chat, quality: ${m.prior}, cost: { input_per_mtok: ${m.inPerMtok}, output_per_mtok: ${m.outPerMtok} } }`).join('\n')}
routes:
  - { name: sim, models: [auto], strategy: feedback_driven, targets: [${MODELS.map((m) => `mock/${m.id}`).join(', ')}] }
  - { name: sim-cost, models: [auto-cost], strategy: smart_cost, targets: [${MODELS.map((m) => `mock/${m.id}`).join(', ')}] }
`;

const CALLER: Caller = {
  orgId: ORG,
  keyId: 'sim-key',
  plan: 'pro',
  features: ['feedback_routing', 'explain'],
  permissions: ['read', 'write'],
  killSwitches: [],
  monthlyRequestLimit: null,
} as Caller;

/** Session i's user: the same uniform draws whatever model serves it (common random numbers). */
interface User {
  uScore: number;
  uUseful: number;
  uGives: number;
  uNoise: number;
  uNoiseScore: number;
  uNoiseUseful: number;
  uLatency: number;
  promptTokens: number;
  completionTokens: number;
}

function makeUsers(seed: number, sessions = SESSIONS): User[] {
  const r = mulberry32(seed * 7919 + 17);
  return Array.from({ length: sessions }, () => ({
    uScore: r(),
    uUseful: r(),
    uGives: r(),
    uNoise: r(),
    uNoiseScore: r(),
    uNoiseUseful: r(),
    uLatency: r(),
    promptTokens: 400 + Math.floor(r() * 200),
    completionTokens: 150 + Math.floor(r() * 250),
  }));
}

/**
 * What the simulated users meet: each model's score distribution and useful rate at session i, and
 * the share of random answers. The stationary world is the models as listed; the drift scenarios
 * (DRIFTS) change one of them part-way.
 */
interface World {
  cdf(m: number, i: number): number[];
  usefulRate(m: number, i: number): number;
  /** True mean outcome of model m at session i (regret, the oracle's best). */
  trueY(m: number, i: number): number;
  noiseRate: number;
}

const STATIONARY: World = { cdf: (m) => CDF[m], usefulRate: (m) => MODELS[m].usefulRate, trueY: (m) => TRUE_Y[m], noiseRate: NOISE_RATE };

function feedbackOf(u: User, m: number, i: number, world: World = STATIONARY): { score: number; useful: boolean } | null {
  if (u.uGives >= FEEDBACK_RATE) return null;
  if (u.uNoise < world.noiseRate) return { score: Math.min(10, Math.floor(u.uNoiseScore * 11)), useful: u.uNoiseUseful < 0.5 };
  const score = world.cdf(m, i).findIndex((c) => u.uScore < c);
  return { score: score < 0 ? 10 : score, useful: u.uUseful < world.usefulRate(m, i) };
}

const costOf = (u: User, m: number) => (u.promptTokens * MODELS[m].inPerMtok + u.completionTokens * MODELS[m].outPerMtok) / 1e6;

type Policy = 'feedback_driven' | 'epsilon_greedy' | 'static_prior' | 'smart_cost';

interface CalPoint {
  confidence: number;
  best: boolean;
}

interface RunResult {
  choices: number[];
  shadowCost: number[]; // smart_cost's pick over feedback_driven's stats (feedback_driven run only)
  calDry: CalPoint[];
  calLive: CalPoint[];
  /** Change points the detector recorded, each with the number of sessions served when the beat that found it ran. */
  changes: Array<{ model: number; direction: string; atSession: number }>;
  /** Sessions whose pick was a re-try of a starved or rising candidate (feedback_driven), and of those the rising ones. */
  retries: number;
  risingRetries: number;
}

/** ROUTING_SIM_ROUTING: extra `routing:` keys (a YAML flow mapping's inside), e.g. `retry_starved: { enabled: false }`. */
const ROUTING_EXTRA = process.env.ROUTING_SIM_ROUTING ?? '';

async function runPolicy(policy: Policy, seed: number, users: User[], world: World = STATIONARY): Promise<RunResult> {
  const env = { GATEWAY_DATA_DIR: '/tmp/routing-sim-unused' };
  const config = new AppConfig(loadEnv(env), loadGatewayConfig(ROUTING_EXTRA ? `${YAML}\nrouting: { ${ROUTING_EXTRA} }\n` : YAML, env));
  const sql: SqlStore = await createTestPglite();
  const snapshot = new StatsSnapshotService();
  const metrics = new MetricsService();
  const job = new AggregationJob(new ModelStatsRepository(sql), snapshot, config, metrics, new StoreFallback(metrics, { pino: pino({ level: 'silent' }) }));
  const routing = new RoutingService(config, snapshot);
  const rng = mulberry32(seed * 104729 + policy.length * 31 + policy.charCodeAt(0));
  const epsRng = mulberry32(seed * 1299709 + 5);

  const out: RunResult = { choices: [], shadowCost: [], calDry: [], calLive: [], changes: [], retries: 0, risingRetries: 0 };
  const sessions = users.length;
  const pending: Array<{ due: number; rows: Array<{ session: string; score: number; useful: boolean }> }> = [];
  const input = (model: string, requestId: string, mode: 'live' | 'dry-run') => ({
    caller: CALLER,
    model,
    messages: [{ role: 'user' as const, content: PROMPT }],
    maxCompletionTokens: MAX_COMPLETION,
    sessionId: requestId,
    requestId,
    mode,
    random: rng,
  });
  const pick = (d: RoutingDecision) => idx(d.plan[0].model);

  try {
    for (let beat = 0; beat * BEAT < sessions; beat++) {
      const traces: unknown[][] = [];
      const fb: Array<{ session: string; score: number; useful: boolean }> = [];
      for (let i = beat * BEAT; i < Math.min(sessions, (beat + 1) * BEAT); i++) {
        const u = users[i];
        const session = `s${seed}-${i}`;
        let m: number;
        if (policy === 'feedback_driven' || policy === 'smart_cost') {
          const d = routing.route(input(policy === 'feedback_driven' ? 'auto' : 'auto-cost', session, 'live'));
          m = pick(d);
          if (d.insight.evidence?.retry) out.retries++;
          if (d.insight.evidence?.retry === 'rising') out.risingRetries++;
          // The stationary scenario's calibration and smart_cost shadow (the drift scenarios report neither).
          if (policy === 'feedback_driven' && world === STATIONARY) {
            if (d.insight.confidence !== null) out.calLive.push({ confidence: d.insight.confidence, best: m === BEST });
            out.shadowCost.push(pick(routing.route(input('auto-cost', `${session}-shadow`, 'live'))));
          }
        } else if (policy === 'static_prior') {
          m = PRIOR_BEST;
        } else {
          if (epsRng() < EPSILON) m = Math.floor(epsRng() * MODELS.length);
          else {
            const est = MODELS.map((mm) => {
              const s = snapshot.get(ORG, 'mock', mm.id);
              return s && s.n > 0 ? s.outcomeMean : mm.prior;
            });
            m = est.indexOf(Math.max(...est));
          }
        }
        out.choices.push(m);
        const latency = MODELS[m].latencyMs * (0.7 + 0.6 * u.uLatency);
        traces.push([session, ORG, 'sim-key', session, 'chat', 'auto', 'sim', policy, 'mock', MODELS[m].id, 200, latency, u.promptTokens, u.completionTokens, costOf(u, m)]);
        const f = feedbackOf(u, m, i, world);
        if (f) fb.push({ session, ...f });
      }
      await insertTraces(sql, traces);
      pending.push({ due: beat + FEEDBACK_DELAY_BEATS, rows: fb });
      for (const p of pending.filter((p) => p.due <= beat)) await insertFeedback(sql, p.rows);
      pending.splice(0, pending.length, ...pending.filter((p) => p.due > beat));
      const run = await job.run();
      if (run.aggregation !== 'done' || run.snapshot !== 'refreshed') throw new Error(`aggregation: ${JSON.stringify(run)}`);
      const found = await sql.query<{ model: string; direction: string }>(`SELECT model, direction FROM learning_epochs WHERE id > $1 ORDER BY id`, [out.changes.length]);
      for (const c of found.rows) out.changes.push({ model: idx(c.model), direction: c.direction, atSession: Math.min(sessions, (beat + 1) * BEAT) });
      if (policy === 'feedback_driven' && (world === STATIONARY || seed === TRACE_SEED)) {
        const d = routing.route(input('auto', `dry-${seed}-${beat}`, 'dry-run'));
        if (d.insight.confidence !== null) out.calDry.push({ confidence: d.insight.confidence, best: pick(d) === BEST });
        if (seed === TRACE_SEED) traceBeat(beat, out.choices.slice(beat * BEAT), new LearnedScorer(config.gateway.routing, config.gateway.models, snapshot), d);
      }
    }
  } finally {
    await sql.close();
  }
  return out;
}

/** ROUTING_SIM_TRACE: one line per beat: shares of the beat's sessions, then each candidate's assessment after the job ran. */
function traceBeat(beat: number, choices: number[], scorer: LearnedScorer, d: RoutingDecision): void {
  const now = new Date();
  const cells = MODELS.map((m, i) => {
    const a = scorer.assess({ provider: 'mock', model: m.id }, ORG, now);
    const share = choices.filter((c) => c === i).length;
    const sess = a.signals.session === null ? '  –  ' : a.signals.session.toFixed(3);
    const drift = `${a.change ? ` Δ${a.change.direction}` : ''}${a.served ? ` idle=${a.served.requestsSince}` : ''}${a.riseEvidence > 0 ? ` rise=${a.riseEvidence.toFixed(2)}` : ''}`;
    return `${m.id.slice(0, 8).padEnd(8)} ${String(share).padStart(2)} n=${String(a.n).padStart(4)} ${a.phase.slice(0, 4)} m0=${a.prior.toFixed(3)} ȳ=${sess} μ=${a.score.toFixed(3)}±${Math.sqrt(a.variance).toFixed(3)}${drift}`;
  });
  process.stdout.write(`b${String(beat).padStart(3)} conf=${d.insight.confidence?.toFixed(2)} | ${cells.join(' | ')}\n`);
}

async function insertTraces(sql: SqlStore, rows: unknown[][]): Promise<void> {
  if (rows.length === 0) return;
  const cols = 15;
  const values = rows.map((_, r) => `(${Array.from({ length: cols }, (_, c) => `$${r * cols + c + 1}`).join(', ')})`).join(', ');
  await sql.query(
    `INSERT INTO decision_traces (request_id, org_id, api_key_id, session_id, endpoint, requested_model, route, strategy,
       selected_provider, selected_model, status, latency_ms, prompt_tokens, completion_tokens, cost_usd) VALUES ${values}`,
    rows.flat(),
  );
}

async function insertFeedback(sql: SqlStore, rows: Array<{ session: string; score: number; useful: boolean }>): Promise<void> {
  if (rows.length === 0) return;
  const values = rows.map((_, r) => `($${r * 4 + 1}, $${r * 4 + 2}, $${r * 4 + 3}, $${r * 4 + 4})`).join(', ');
  await sql.query(
    `INSERT INTO feedback (org_id, session_id, score, useful) VALUES ${values}
     ON CONFLICT (org_id, session_id) DO UPDATE SET score = EXCLUDED.score, useful = EXCLUDED.useful, updated_at = now()`,
    rows.flatMap((f) => [ORG, f.session, f.score, f.useful]),
  );
}

// ---------- metrics ----------

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);
const windowShare = (choices: number[], n: number) => {
  const w = choices.slice(Math.max(0, n - WINDOW), n);
  return w.filter((m) => m === BEST).length / w.length;
};
const regretOf = (choices: number[]) => choices.reduce((s, m) => s + (TRUE_Y[BEST] - TRUE_Y[m]), 0);
/**
 * Σ a / Σ b over seeds (the ratio of the two mean regrets) with a 95 % interval from a paired
 * bootstrap: BOOTSTRAP resamples of the seeds with replacement, each seed's two regrets kept together
 * (both routers saw that seed's users); the interval is the resamples' 2.5th and 97.5th percentiles.
 */
function ratioWithInterval(a: number[], b: number[]): { ratio: number; low: number; high: number; seeds: number } {
  const ratio = mean(a) / mean(b);
  if (a.length < 2) return { ratio, low: NaN, high: NaN, seeds: a.length };
  const r = mulberry32(20261123);
  const draws = new Float64Array(BOOTSTRAP);
  for (let k = 0; k < BOOTSTRAP; k++) {
    let sa = 0;
    let sb = 0;
    for (let i = 0; i < a.length; i++) {
      const j = Math.floor(r() * a.length);
      sa += a[j];
      sb += b[j];
    }
    draws[k] = sa / sb;
  }
  draws.sort();
  return { ratio, low: draws[Math.floor(0.025 * BOOTSTRAP)], high: draws[Math.ceil(0.975 * BOOTSTRAP) - 1], seeds: a.length };
}

const modelShares = (choices: number[]) => Object.fromEntries(MODELS.map((m, i) => [m.id, choices.filter((c) => c === i).length / choices.length]));

function costFigures(choices: number[], users: User[]) {
  const cost = choices.reduce((s, m, i) => s + costOf(users[i], m), 0);
  const baseline = users.reduce((s, u) => s + costOf(u, BEST), 0); // always the truly best-quality model
  const quality = mean(choices.map((m) => TRUE_Y[m]));
  return { costUsd: cost, baselineCostUsd: baseline, costSaved: 1 - cost / baseline, qualityLost: TRUE_Y[BEST] - quality, qualityLostRel: (TRUE_Y[BEST] - quality) / TRUE_Y[BEST] };
}

function calibration(points: CalPoint[]) {
  const buckets = [
    [0, 0.5],
    [0.5, 0.6],
    [0.6, 0.8],
    [0.8, 0.9],
    [0.9, 1.0001],
  ];
  const hi = points.filter((p) => p.confidence >= 0.8);
  return {
    n: points.length,
    highConfidence: { n: hi.length, meanConfidence: mean(hi.map((p) => p.confidence)), chosenWasBest: mean(hi.map((p) => (p.best ? 1 : 0))) },
    buckets: buckets.map(([lo, up]) => {
      const b = points.filter((p) => p.confidence >= lo && p.confidence < up);
      return { range: `[${lo}, ${Math.min(1, up)}${up > 1 ? ']' : ')'}`, n: b.length, meanConfidence: mean(b.map((p) => p.confidence)), chosenWasBest: mean(b.map((p) => (p.best ? 1 : 0))) };
    }),
  };
}

const pct = (x: number) => (Number.isFinite(x) ? `${(100 * x).toFixed(1)} %` : '–');
const f1 = (x: number) => x.toFixed(1);
const range = (xs: number[], fmt: (x: number) => string) => `${fmt(mean(xs))} (${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))})`;

// ---------- drift scenarios ----------

/** ROUTING_SIM_SCENARIOS: which to run (default all): stationary (the four routers above), drop, rise, slow, control. */
const SCENARIOS = new Set((process.env.ROUTING_SIM_SCENARIOS ?? 'stationary,drop,rise,slow,control').split(',').map((x) => x.trim()));
/** Seeds per drift scenario (ROUTING_SIM_DRIFT_SEEDS, default 20): seeds FIRST … FIRST + DRIFT_SEEDS − 1. */
const DRIFT_SEEDS = Number(process.env.ROUTING_SIM_DRIFT_SEEDS ?? 20);
/** "x % of the traffic on the new best from session s" = of sessions s … s + SHARE_WINDOW − 1. */
const SHARE_WINDOW = 50;

/**
 * A drift scenario (README "Drift: change detection"): one model's score distribution and useful rate
 * change part-way (`model` null: none changes, the control), the feedback_driven router serves every
 * session, and what it did is compared with the oracle that knows every model's true outcome at every
 * session.
 */
interface Drift {
  name: 'drop' | 'rise' | 'slow' | 'control';
  title: string;
  sessions: number;
  model: number | null;
  /** The changing model's score mean and useful rate at session i, the change starting at session c. */
  quality(i: number, c: number): { scoreMean: number; usefulRate: number };
  /**
   * The first session of the change for a seed (the control: none, the run's length). The abrupt
   * changes fall anywhere in sessions 900–1,099, so no seed's change lines up with a re-try's cycle.
   */
  changeAt(seed: number): number;
  noiseRate: number;
}

const abruptAt = (seed: number) => 900 + ((seed * 37) % 200);

const BAL = MODELS.findIndex((m) => m.id === 'balanced-pro');
const LEGACY = MODELS.findIndex((m) => m.id === 'legacy-7b');
const DRIFTS: Drift[] = [
  {
    name: 'drop',
    title: 'abrupt drop of the best (balanced-pro 8.6/0.86 → 6.0/0.55, at a session in 900–1,099)',
    sessions: 2000,
    model: BAL,
    quality: (i, c) => (i < c ? { scoreMean: 8.6, usefulRate: 0.86 } : { scoreMean: 6.0, usefulRate: 0.55 }),
    changeAt: abruptAt,
    noiseRate: NOISE_RATE,
  },
  {
    name: 'rise',
    title: 'abrupt rise of a neglected model (legacy-7b 5.8/0.50 → 9.4/0.95, at a session in 900–1,099)',
    sessions: 2000,
    model: LEGACY,
    quality: (i, c) => (i < c ? { scoreMean: 5.8, usefulRate: 0.5 } : { scoreMean: 9.4, usefulRate: 0.95 }),
    changeAt: abruptAt,
    noiseRate: NOISE_RATE,
  },
  {
    name: 'slow',
    title: 'slow decline of the best (balanced-pro 8.6/0.86 → 6.0/0.55, linearly over sessions 500–1,500)',
    sessions: 2000,
    model: BAL,
    quality: (i) => {
      const t = Math.min(1, Math.max(0, (i - 500) / 1000));
      return { scoreMean: 8.6 - 2.6 * t, usefulRate: 0.86 - 0.31 * t };
    },
    changeAt: () => 500,
    noiseRate: NOISE_RATE,
  },
  {
    name: 'control',
    title: 'no change, noisy feedback (30 % of answers random), 4,000 sessions',
    sessions: 4000,
    model: null,
    quality: () => ({ scoreMean: 0, usefulRate: 0 }),
    changeAt: () => 4000,
    noiseRate: 0.3,
  },
];

function worldOf(d: Drift, c: number): World {
  const byQuality = new Map<string, { cdf: number[]; y: number }>();
  const changing = (i: number) => {
    const q = d.quality(i, c);
    const key = `${q.scoreMean}|${q.usefulRate}`;
    let v = byQuality.get(key);
    if (!v) {
      const pmf = scorePmf(q.scoreMean);
      const cdf = pmf.map((_, k) => pmf.slice(0, k + 1).reduce((a, b) => a + b, 0));
      const score = pmf.reduce((acc, pk, k) => acc + pk * k, 0);
      v = { cdf, y: W_SCORE * (score / 10) + W_USEFUL * q.usefulRate };
      byQuality.set(key, v);
    }
    return v;
  };
  return {
    cdf: (m, i) => (m === d.model ? changing(i).cdf : CDF[m]),
    usefulRate: (m, i) => (m === d.model ? d.quality(i, c).usefulRate : MODELS[m].usefulRate),
    trueY: (m, i) => (m === d.model ? changing(i).y : TRUE_Y[m]),
    noiseRate: d.noiseRate,
  };
}

interface DriftSeed {
  seed: number;
  changeAt: number;
  /** Sessions from the change to the beat that found it (the changing model's first change point at or after the change); null: none. */
  toDetect: number | null;
  /** Sessions from the oracle's new best to the first window of SHARE_WINDOW sessions with ≥ 50 % / ≥ 90 % of them on it; null: never. */
  to50: number | null;
  to90: number | null;
  /** Share of the new best over the last 100 sessions of the scenario. */
  finalShare: number;
  /** Σ (oracle's true outcome − chosen model's) over the whole run, and from the change on. */
  regret: number;
  regretAfter: number;
  /** Change points that are not the changing model's at or after its change. */
  falseAlarms: number;
  retries: number;
}

const median = (xs: Array<number | null>) => {
  const v = xs.map((x) => (x === null ? Infinity : x)).sort((a, b) => a - b);
  if (!v.length) return NaN;
  return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
};
const quantile = (xs: Array<number | null>, q: number) => {
  const v = xs.map((x) => (x === null ? Infinity : x)).sort((a, b) => a - b);
  return v[Math.min(v.length - 1, Math.floor(q * v.length))];
};
const sessionsText = (x: number) => (Number.isFinite(x) ? `${Math.round(x)}` : 'never');

async function driftScenarios(drifts: Drift[]): Promise<void> {
  const started = Date.now();
  const results: Record<string, { title: string; seeds: DriftSeed[] }> = {};
  for (const d of drifts) {
    const seeds: DriftSeed[] = [];
    for (let seed = FIRST_SEED; seed < FIRST_SEED + DRIFT_SEEDS; seed++) {
      const changeAt = d.changeAt(seed);
      const world = worldOf(d, changeAt);
      const oracle = Array.from({ length: d.sessions }, (_, i) => {
        const ys = MODELS.map((_, m) => world.trueY(m, i));
        return ys.indexOf(Math.max(...ys));
      });
      const before = oracle[0];
      const newBestFrom = oracle.findIndex((b, i) => i >= changeAt && b !== before);
      const r = await runPolicy('feedback_driven', seed, makeUsers(seed, d.sessions), world);
      const regretAt = (i: number) => world.trueY(oracle[i], i) - world.trueY(r.choices[i], i);
      const firstWindow = (share: number) => {
        if (newBestFrom < 0) return null;
        for (let s0 = newBestFrom; s0 + SHARE_WINDOW <= d.sessions; s0++) {
          const w = r.choices.slice(s0, s0 + SHARE_WINDOW);
          if (w.filter((c, k) => c === oracle[s0 + k]).length >= share * SHARE_WINDOW) return s0 - newBestFrom;
        }
        return null;
      };
      const hit = d.model === null ? undefined : r.changes.find((c) => c.model === d.model && c.atSession > changeAt);
      const tail = r.choices.slice(-100);
      seeds.push({
        seed,
        changeAt,
        toDetect: hit ? hit.atSession - changeAt : null,
        to50: firstWindow(0.5),
        to90: firstWindow(0.9),
        finalShare: tail.filter((c, k) => c === oracle[d.sessions - 100 + k]).length / tail.length,
        regret: r.choices.reduce((acc, _, i) => acc + regretAt(i), 0),
        regretAfter: r.choices.reduce((acc, _, i) => acc + (i >= changeAt ? regretAt(i) : 0), 0),
        falseAlarms: r.changes.filter((c) => c.model !== d.model || c.atSession <= changeAt).length,
        retries: r.retries,
      });
    }
    results[d.name] = { title: d.title, seeds };
    process.stdout.write(`drift scenario ${d.name} done (${((Date.now() - started) / 1000).toFixed(1)} s)\n`);
  }

  const lines: string[] = ['', `## Drift scenarios (feedback_driven, ${DRIFT_SEEDS} seeds each; median over seeds, (10th–90th percentile) where shown)`, ''];
  lines.push('| scenario | sessions to detect | to 50 % on the new best | to 90 % | new best, last 100 sessions | regret vs oracle after the change (whole run) | false alarms per 10,000 sessions per model | re-tries |');
  lines.push('|---|---|---|---|---|---|---|---|');
  const summary: Record<string, unknown> = {};
  for (const d of drifts) {
    const xs = results[d.name].seeds;
    const fa = xs.reduce((n, x) => n + x.falseAlarms, 0);
    const faRate = (fa / (xs.length * d.sessions * MODELS.length)) * 10_000;
    const row = {
      toDetect: { median: median(xs.map((x) => x.toDetect)), p10: quantile(xs.map((x) => x.toDetect), 0.1), p90: quantile(xs.map((x) => x.toDetect), 0.9), missed: xs.filter((x) => x.toDetect === null).length },
      to50: { median: median(xs.map((x) => x.to50)), p90: quantile(xs.map((x) => x.to50), 0.9) },
      to90: { median: median(xs.map((x) => x.to90)), p90: quantile(xs.map((x) => x.to90), 0.9) },
      finalShare: mean(xs.map((x) => x.finalShare)),
      regretAfter: mean(xs.map((x) => x.regretAfter)),
      regret: mean(xs.map((x) => x.regret)),
      falseAlarms: fa,
      falseAlarmsPerTenThousandSessionsPerModel: faRate,
      retriesPerSeed: mean(xs.map((x) => x.retries)),
    };
    summary[d.name] = { title: d.title, sessions: d.sessions, ...row, perSeed: xs };
    const detect = d.model === null ? '–' : `${sessionsText(row.toDetect.median)} (${sessionsText(row.toDetect.p10)}–${sessionsText(row.toDetect.p90)})${row.toDetect.missed ? `, ${row.toDetect.missed} missed` : ''}`;
    const share = (x: { median: number; p90: number }) => (d.model === null ? '–' : `${sessionsText(x.median)} (90th pct ${sessionsText(x.p90)})`);
    lines.push(
      `| ${d.title} | ${detect} | ${share(row.to50)} | ${share(row.to90)} | ${d.model === null ? '–' : pct(row.finalShare)} | ${f1(row.regretAfter)} (${f1(row.regret)}) | ${faRate.toFixed(2)} (${fa}) | ${f1(row.retriesPerSeed)} |`,
    );
  }
  lines.push('', `Sessions counted from the change (to detect: to the end of the beat that found it) or, for the traffic shares, from the first session where the oracle's best model changed; a share is of the ${SHARE_WINDOW} sessions from that one on. Routing overrides: ${ROUTING_EXTRA || 'none'}.`);
  lines.push(`(${((Date.now() - started) / 1000).toFixed(1)} s)`, '');
  process.stdout.write(lines.join('\n') + '\n');
  if (process.env.ROUTING_SIM_DRIFT_WRITE === '0') return;
  const dir = join(__dirname, 'results');
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, 'routing-drift-latest.json'),
    JSON.stringify({ generatedAt: new Date().toISOString(), seeds: DRIFT_SEEDS, firstSeed: FIRST_SEED, beat: BEAT, shareWindow: SHARE_WINDOW, routingOverrides: ROUTING_EXTRA || null, scenarios: summary, durationSeconds: (Date.now() - started) / 1000 }, null, 2) + '\n',
  );
}

async function stationary(): Promise<void> {
    const started = Date.now();
    const policies: Policy[] = ['feedback_driven', 'epsilon_greedy', 'static_prior', 'smart_cost'];
    const runs: Record<Policy, RunResult[]> = { feedback_driven: [], epsilon_greedy: [], static_prior: [], smart_cost: [] };
    const usersBySeed: User[][] = [];
    for (let seed = FIRST_SEED; seed < FIRST_SEED + SEEDS; seed++) {
      const users = makeUsers(seed);
      usersBySeed.push(users);
      for (const p of policies) if (!ONLY || ONLY.has(p)) runs[p].push(await runPolicy(p, seed, users));
      process.stdout.write(`seed ${seed}/${SEEDS} done (${((Date.now() - started) / 1000).toFixed(1)} s)\n`);
    }

    const perPolicy = Object.fromEntries(
      (['feedback_driven', 'epsilon_greedy', 'static_prior', 'smart_cost'] as Policy[]).map((p) => {
        const rs = runs[p];
        return [
          p,
          {
            shareOnBest: Object.fromEntries(CHECKPOINTS.map((c) => [c, mean(rs.map((r) => windowShare(r.choices, c)))])),
            shareOnBestPerSeed: Object.fromEntries(CHECKPOINTS.map((c) => [c, rs.map((r) => windowShare(r.choices, c))])),
            cumulativeShareOnBest: mean(rs.map((r) => r.choices.filter((m) => m === BEST).length / r.choices.length)),
            regret: mean(rs.map((r) => regretOf(r.choices))),
            regretPerSeed: rs.map((r) => regretOf(r.choices)),
            modelShares: rs.map((r) => modelShares(r.choices)),
            cost: rs.map((r, s) => costFigures(r.choices, usersBySeed[s])),
          },
        ];
      }),
    ) as Record<Policy, { shareOnBest: Record<number, number>; shareOnBestPerSeed: Record<number, number[]>; cumulativeShareOnBest: number; regret: number; regretPerSeed: number[]; modelShares: Record<string, number>[]; cost: ReturnType<typeof costFigures>[] }>;
    const shadow = runs.feedback_driven.map((r, s) => costFigures(r.shadowCost, usersBySeed[s]));
    const shadowLate = runs.feedback_driven.map((r, s) => costFigures(r.shadowCost.slice(-WINDOW), usersBySeed[s].slice(SESSIONS - WINDOW)));
    const shadowShares = runs.feedback_driven.map((r) => modelShares(r.shadowCost.slice(-WINDOW)));
    const calDry = calibration(runs.feedback_driven.flatMap((r) => r.calDry));
    const calLive = calibration(runs.feedback_driven.flatMap((r) => r.calLive));

    const fd = perPolicy.feedback_driven;
    const eps = perPolicy.epsilon_greedy;
    const last = CHECKPOINTS[CHECKPOINTS.length - 1];
    const seeds = fd.regretPerSeed.map((_, i) => FIRST_SEED + i);
    const ratioOver = (keep: (seed: number) => boolean) => {
      const at = seeds.flatMap((seed, i) => (keep(seed) ? [i] : []));
      return ratioWithInterval(at.map((i) => fd.regretPerSeed[i]), at.map((i) => eps.regretPerSeed[i]));
    };
    const ratio = ratioOver(() => true);
    const tuning = ratioOver((seed) => seed <= TUNING_SEEDS);
    const heldOut = ratioOver((seed) => seed > TUNING_SEEDS);
    const targets = {
      shareOnBestAt2000: { value: fd.shareOnBest[last], target: 0.9, met: fd.shareOnBest[last] >= 0.9 },
      regretVsEpsilonGreedy: {
        value: ratio.ratio,
        target: 0.5,
        met: fd.regret <= 0.5 * eps.regret,
        interval95: [ratio.low, ratio.high],
        tuningSeeds: tuning,
        heldOutSeeds: heldOut,
      },
    };

    const lines: string[] = [];
    lines.push('', `## Routing learning benchmark (${SEEDS} seeds × ${SESSIONS} sessions; mean over seeds, (min–max))`, '');
    lines.push(`Models (true mean outcome y = 0.6·score/10 + 0.4·useful; benchmark prior; cost per Mtok in/out):`, '');
    lines.push('| model | prior `quality` | true mean score | useful rate | true y | latency | $/Mtok in/out |', '|---|---|---|---|---|---|---|');
    MODELS.forEach((m, i) =>
      lines.push(`| ${m.id}${i === BEST ? ' **(true best)**' : ''}${i === PRIOR_BEST ? ' (best prior)' : ''} | ${m.prior} | ${TRUE_SCORE[i].toFixed(2)} | ${m.usefulRate} | ${TRUE_Y[i].toFixed(3)} | ${m.latencyMs} ms | ${m.inPerMtok} / ${m.outPerMtok} |`),
    );
    lines.push('', `Beat = ${BEAT} sessions, aggregation job each beat; feedback from ${pct(FEEDBACK_RATE)} of sessions, ${FEEDBACK_DELAY_BEATS} beat late, ${pct(NOISE_RATE)} of it random.`, '');
    lines.push(`| router | ${CHECKPOINTS.map((c) => `on best @${c} (last ${WINDOW})`).join(' | ')} | on best, all ${SESSIONS} | cumulative regret |`);
    lines.push(`|---|${CHECKPOINTS.map(() => '---|').join('')}---|---|`);
    for (const p of ['feedback_driven', 'epsilon_greedy', 'static_prior', 'smart_cost'] as Policy[]) {
      const x = perPolicy[p];
      lines.push(`| ${p === 'epsilon_greedy' ? `epsilon-greedy (ε = ${EPSILON})` : p === 'static_prior' ? 'static best-prior' : p} | ${CHECKPOINTS.map((c) => range(x.shareOnBestPerSeed[c], pct)).join(' | ')} | ${pct(x.cumulativeShareOnBest)} | ${range(x.regretPerSeed, f1)} |`);
    }
    lines.push('', '| smart_cost | cost saved vs always the true best | quality lost (y, absolute) | quality lost (relative) |', '|---|---|---|---|');
    const costRow = (name: string, cs: ReturnType<typeof costFigures>[]) =>
      lines.push(`| ${name} | ${range(cs.map((c) => c.costSaved), pct)} | ${range(cs.map((c) => c.qualityLost), (x) => x.toFixed(3))} | ${range(cs.map((c) => c.qualityLostRel), pct)} |`);
    costRow('live, own traffic (all sessions)', perPolicy.smart_cost.cost);
    costRow('shadow over feedback_driven stats (all sessions)', shadow);
    costRow(`shadow over feedback_driven stats (last ${WINDOW})`, shadowLate);
    costRow('feedback_driven (for comparison)', perPolicy.feedback_driven.cost);
    lines.push('', '| confidence calibration (feedback_driven) | decisions | with confidence ≥ 0.8 | their mean confidence | chosen was the true best |', '|---|---|---|---|---|');
    lines.push(`| dry-run, one per beat | ${calDry.n} | ${calDry.highConfidence.n} | ${pct(calDry.highConfidence.meanConfidence)} | ${pct(calDry.highConfidence.chosenWasBest)} |`);
    lines.push(`| live (Thompson pick) | ${calLive.n} | ${calLive.highConfidence.n} | ${pct(calLive.highConfidence.meanConfidence)} | ${pct(calLive.highConfidence.chosenWasBest)} |`);
    lines.push('', '| live confidence bucket | decisions | mean confidence | chosen was the true best |', '|---|---|---|---|');
    for (const b of calLive.buckets) lines.push(`| ${b.range} | ${b.n} | ${pct(b.meanConfidence)} | ${pct(b.chosenWasBest)} |`);
    lines.push('', `Targets: ≥ 90 % on the best model by ${last} sessions: ${pct(targets.shareOnBestAt2000.value)} → ${targets.shareOnBestAt2000.met ? 'met' : 'NOT met'}; regret ≤ ½ of epsilon-greedy's: ratio ${targets.regretVsEpsilonGreedy.value.toFixed(3)} → ${targets.regretVsEpsilonGreedy.met ? 'met' : 'NOT met'}.`);
    const ratioText = (x: ReturnType<typeof ratioWithInterval>) => (x.seeds === 0 ? '–' : `${x.ratio.toFixed(3)} (95 % interval ${x.low.toFixed(3)}–${x.high.toFixed(3)}, ${x.seeds} seeds)`);
    lines.push(`Regret ratio, paired bootstrap over seeds: all ${ratioText(ratio)}; seeds 1–${TUNING_SEEDS} (routing.exploration chosen on them) ${ratioText(tuning)}; held-out seeds > ${TUNING_SEEDS} ${ratioText(heldOut)}.`);
    const fdChanges = runs.feedback_driven.reduce((n, r) => n + r.changes.length, 0);
    const fdSessions = runs.feedback_driven.length * SESSIONS;
    lines.push(
      `feedback_driven without any change: ${fdChanges} change point(s) detected in ${fdSessions} sessions × ${MODELS.length} models (${((fdChanges / (fdSessions * MODELS.length)) * 10_000).toFixed(2)} false alarms per 10,000 sessions per model); ${runs.feedback_driven.reduce((n, r) => n + r.retries, 0)} re-tries of starved or rising models (${pct(runs.feedback_driven.reduce((n, r) => n + r.retries, 0) / fdSessions)} of sessions; ${runs.feedback_driven.reduce((n, r) => n + r.risingRetries, 0)} of them following up a rise).`,
    );
    lines.push(`(${((Date.now() - started) / 1000).toFixed(1)} s)`, '');
    process.stdout.write(lines.join('\n') + '\n');
    if (ONLY) {
      for (const p of ONLY) {
        if (!perPolicy[p as Policy]) continue;
        process.stdout.write(`${p} regret per seed: ${perPolicy[p as Policy].regretPerSeed.map(f1).join(', ')}\n`);
        // Where the regret comes from: per model, per stretch of sessions (mean over seeds).
        const cuts = [0, 50, 100, 250, 500, 1000, 2000].filter((c) => c <= SESSIONS);
        for (let k = 0; k + 1 < cuts.length; k++) {
          const per = MODELS.map((_, m) => mean(runs[p as Policy].map((r) => regretOf(r.choices.slice(cuts[k], cuts[k + 1]).filter((c) => c === m)))));
          process.stdout.write(`  sessions ${cuts[k]}–${cuts[k + 1]}: ${MODELS.map((mm, m) => `${mm.id} ${f1(per[m])}`).join(', ')}\n`);
        }
      }
      return; // a diagnostic run over some policies only: keep the last full results
    }

    const dir = join(__dirname, 'results');
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, 'routing-latest.json'),
      JSON.stringify(
        {
          generatedAt: new Date().toISOString(),
          parameters: { seeds: SEEDS, sessions: SESSIONS, beat: BEAT, feedbackDelayBeats: FEEDBACK_DELAY_BEATS, feedbackRate: FEEDBACK_RATE, noiseRate: NOISE_RATE, scoreSd: SCORE_SD, epsilon: EPSILON, window: WINDOW, outcomeWeights: { score: W_SCORE, useful: W_USEFUL } },
          models: MODELS.map((m, i) => ({ ...m, trueMeanScore: TRUE_SCORE[i], trueOutcome: TRUE_Y[i], trueBest: i === BEST, bestPrior: i === PRIOR_BEST })),
          policies: perPolicy,
          smartCost: { live: perPolicy.smart_cost.cost, shadowOverFeedbackDriven: shadow, shadowOverFeedbackDrivenLastWindow: shadowLate, shadowModelSharesLastWindow: shadowShares },
          calibration: { dryRun: calDry, live: calLive },
          targets,
          changePoints: { detected: fdChanges, sessions: fdSessions, perTenThousandSessionsPerModel: (fdChanges / (fdSessions * MODELS.length)) * 10_000 },
          retries: runs.feedback_driven.map((r) => r.retries),
          routingOverrides: ROUTING_EXTRA || null,
          durationSeconds: (Date.now() - started) / 1000,
        },
        null,
        2,
      ) + '\n',
    );
}

test(
  'routing learning benchmark',
  async () => {
    if (SCENARIOS.has('stationary')) await stationary();
    const drifts = DRIFTS.filter((d) => SCENARIOS.has(d.name));
    if (drifts.length) await driftScenarios(drifts);
  },
  90 * 60 * 1000,
);
