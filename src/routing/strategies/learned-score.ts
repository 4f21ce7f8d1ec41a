import { ownValue } from '../../common/own-key';
import type { GatewayConfig, ModelSpec, TargetRef } from '../../config/gateway-config';
import type { ModelStats, StatsSnapshot } from '../../learning/model-stats';
import { REGRESSION_WINDOW_MS, RegressionsView } from '../regressions/regressions-view';
import type { Candidate, ConfidenceReason, Phase, RoutingEvidence } from '../routing.types';
import { quickNormal } from './random';

export type RouterParams = GatewayConfig['routing'];
export type SignalWeights = { session: number; auto: number; manual: number; benchmark: number };

/** Where a candidate's prior mean came from. */
export type PriorSource = 'catalogue' | 'pool' | 'default';

/**
 * Everything the learning strategies know about one candidate (docs/architecture.md "One model
 * of uncertainty"). `score` is what explain reports and what selection, confidence and exploration
 * all draw around, so the numbers agree with each other.
 */
export interface Assessment extends TargetRef {
  /** The organisation's samples for the pair (sessions with feedback, `model_stats.n`). */
  n: number;
  phase: Phase;
  weights: SignalWeights;
  /** The four signals in [0, 1]; null when there is nothing to say (no feedback, no traffic, not configured). */
  signals: { session: number | null; auto: number | null; manual: number | null; benchmark: number | null };
  prior: number;
  priorSource: PriorSource;
  /** Posterior mean before the regression penalty. */
  mean: number;
  /** Posterior variance σ²/(n0 + n). */
  variance: number;
  /** Subtracted from the mean for the regressions of the last 7 days. */
  penalty: number;
  /** mean − penalty: the candidate's score. */
  score: number;
  /** The organisation's observed outcome variance for the pair (0 without samples). */
  outcomeVariance: number;
  /** Regressions of the pair for the organisation in the last 7 days, newest first. */
  regressions: readonly Date[];
  /** The latest change point the detector found for the pair, when it was detected in the last 7 days. */
  change: { since: Date; direction: 'drop' | 'rise'; detectedAt: Date } | null;
  /** When the pair last served a request, and how many of the organisation's requests came after; null when unknown. */
  served: { lastAt: Date; requestsSince: number } | null;
  /** The outcome test's rise statistic over its alarm threshold (0 without one). */
  riseEvidence: number;
  /** The outcome test is held on a re-try of the starved candidate (cusum.ts): it needs answers to decide (riseEvidence is then its own statistic's, > 0 while its answers lean to a rise). */
  riseTesting: boolean;
}

const clamp01 = (x: number) => Math.min(1, Math.max(0, x));

/**
 * The learned score of a candidate, per (organisation, provider, model), from the stats snapshot
 * and the regression record (README "Configuration", `routing.*`):
 *
 *   phase      from n: cold_start (n < n_min), learning, steady (n ≥ n_steady); it picks the signal
 *              weights w = routing.weights[phase] (session, auto, manual, benchmark; they sum to 1).
 *   signals    session = outcome mean ȳ (y = w_s·score/10 + w_u·useful, the learning job's outcome);
 *              auto = success rate × min(1, latency_target_ms / latency p50) (1 when p50 is unknown);
 *              manual = models.<id>.manual_score; benchmark = models.<id>.quality.
 *   observed   ō = a·session + (1 − a)·auto with a = w.session/(w.session + w.auto) (a = 1 when auto is
 *              unknown); its variance s² = a²·outcome_var (auto is a rate over many requests: no noise).
 *              Each candidate uses its own phase's a, so the defaults keep session:auto the same (4:1)
 *              in every phase: candidates in different phases are then compared on the same scale.
 *              (With a ratio that moves with the phase, auto, usually above the feedback outcome, lifts
 *              the candidates with few samples, and scores jump at n_min and n_steady.)
 *   prior      m0 = (w.manual·manual + w.benchmark·benchmark)/(w.manual + w.benchmark) over those
 *              configured, else default_prior, minus (1 − a)·(1 − auto) when the model's traffic
 *              measured auto (the catalogue describes a healthy model: failures, failed fallback
 *              attempts among them, lower it before any feedback does); but when n < n_min and the
 *              cross-organisation pool has ≥ n_min samples, m0 = the pool's observed ō (same blend,
 *              its own auto) instead (usedSharedPoolPrior).
 *   posterior  Normal(μ, σ²/(n0 + n)) with μ = (n0·m0 + n·ō)/(n0 + n) and
 *              σ² = max(variance_floor, (n·s² + n0·prior_variance)/(n0 + n)): the prior is worth n0
 *              pseudo-samples of variance prior_variance, so a day-zero candidate is wide (variance
 *              prior_variance/n0) and a well-sampled one as narrow as its own outcomes say. With
 *              prior_variance near a session outcome's variance (default .04) the pseudo-samples do not
 *              widen σ² once real samples arrive (the former .1 with n0 = 5 kept σ² up to 1.5× the
 *              outcomes' own variance over the first dozens of samples: wider draws, more exploration).
 *   regressions each regression of the last 7 days lowers the score by penalty·(1 − age/7 days),
 *              so its effect fades out linearly; the total is capped at max_penalty.
 *   score      μ − penalty.
 */
export class LearnedScorer {
  constructor(
    private readonly params: RouterParams,
    private readonly models: Readonly<Record<string, ModelSpec>>,
    private readonly stats?: StatsSnapshot,
    private readonly regressions?: RegressionsView,
  ) {}

  get n0(): number {
    return this.params.n0;
  }

  phaseOf(n: number): Phase {
    if (n < this.params.n_min) return 'cold_start';
    return n >= this.params.n_steady ? 'steady' : 'learning';
  }

  /** Samples the organisation has across every model (0 = day zero). */
  orgSamples(orgId: string): number {
    return this.stats?.orgSamples(orgId) ?? 0;
  }

  assess(target: TargetRef, orgId: string, now: Date): Assessment {
    const p = this.params;
    const own = this.stats?.get(orgId, target.provider, target.model);
    const n = own?.n ?? 0;
    const phase = this.phaseOf(n);
    const w = p.weights[phase];
    const model = ownValue(this.models, target.model);
    const session = own && own.n > 0 ? own.outcomeMean : null;
    const auto = this.autoSignal(own);
    const manual = model?.manual_score ?? null;
    const benchmark = model?.quality ?? null;

    const observed = this.observed(own, w);
    let prior: number;
    let priorSource: PriorSource;
    const pool = n < p.n_min ? this.stats?.pool(target.provider, target.model) : undefined;
    const poolObserved = pool && pool.n >= p.n_min ? this.observed(pool, w) : undefined;
    if (poolObserved) {
      prior = poolObserved.mean;
      priorSource = 'pool';
    } else {
      const parts: Array<[number, number]> = [];
      if (manual !== null) parts.push([w.manual, manual]);
      if (benchmark !== null) parts.push([w.benchmark, benchmark]);
      const total = parts.reduce((s, [weight]) => s + weight, 0);
      if (total > 0) {
        prior = parts.reduce((s, [weight, v]) => s + weight * v, 0) / total;
        priorSource = 'catalogue';
      } else {
        prior = p.default_prior;
        priorSource = 'default';
      }
      // The catalogue (or default) prior is the outcome of a healthy model, auto = 1. Measured traffic
      // that falls short (failures, failed fallback attempts included; latency over the target) lowers
      // it by the auto part's shortfall, so a model that fails and is rescued by fallback loses score
      // before any feedback names it. With auto = 1, or no traffic, the prior is unchanged.
      if (auto !== null) prior = Math.max(0, prior - (1 - sessionShare(w)) * (1 - auto));
    }

    const n0 = p.n0;
    const obsMean = observed?.mean ?? 0;
    const obsVar = observed?.variance ?? 0;
    const mean = (n0 * prior + n * obsMean) / (n0 + n);
    const sigma2 = Math.max(p.variance_floor, (n * obsVar + n0 * p.prior_variance) / (n0 + n));
    const variance = sigma2 / (n0 + n);

    const regressions = this.regressions?.recent(orgId, target.provider, target.model, now) ?? [];
    let penalty = 0;
    for (const at of regressions) {
      const age = Math.max(0, now.getTime() - at.getTime());
      penalty += p.regressions.penalty * Math.max(0, 1 - age / REGRESSION_WINDOW_MS);
    }
    penalty = Math.min(penalty, p.regressions.max_penalty);

    return {
      provider: target.provider,
      model: target.model,
      n,
      phase,
      weights: { ...w },
      signals: { session, auto, manual, benchmark },
      prior,
      priorSource,
      mean,
      variance,
      penalty,
      score: mean - penalty,
      outcomeVariance: own && own.n > 0 ? own.outcomeVar : 0,
      regressions,
      change: own?.change && now.getTime() - own.change.detectedAt.getTime() <= REGRESSION_WINDOW_MS ? own.change : null,
      served: own?.served ?? null,
      riseEvidence: own?.riseEvidence ?? 0,
      riseTesting: own?.riseTesting ?? false,
    };
  }

  /** success rate × min(1, target / p50); null without traffic. */
  private autoSignal(s: ModelStats | undefined): number | null {
    if (!s || s.requests <= 0) return null;
    const latency = s.latencyP50Ms === null || s.latencyP50Ms <= 0 ? 1 : Math.min(1, this.params.latency_target_ms / s.latencyP50Ms);
    return clamp01(s.successRate * latency);
  }

  /**
   * The observed mean ō and its per-sample variance s², or undefined without samples; the session
   * signal alone when no request was counted. A pair with samples but no request figures yet because
   * its window restarted at a change point (requests count
   * from the first whole hour after it, README "Drift: change detection") served the answers of those
   * samples: its auto part is taken as 1, as the catalogue prior's is, so that it is weighed on the
   * same blend as the others and not by its feedback alone (which would put a model that just rose
   * 0.2·(1 − ō) below its peers for up to an hour).
   */
  private observed(s: ModelStats | undefined, w: SignalWeights): { mean: number; variance: number } | undefined {
    if (!s || s.n <= 0) return undefined;
    const auto = this.autoSignal(s) ?? (s.change ? 1 : null);
    const a = auto === null ? 1 : sessionShare(w);
    return { mean: a * s.outcomeMean + (1 - a) * (auto ?? 0), variance: a * a * s.outcomeVar };
  }
}

/** a = w.session/(w.session + w.auto): the session signal's share of the observed outcome (1 when neither weighs). */
const sessionShare = (w: SignalWeights): number => (w.session + w.auto <= 0 ? 1 : w.session / (w.session + w.auto));

/** An assessed candidate as the routing decision lists it. */
export const asCandidate = (a: Assessment): Candidate => ({ provider: a.provider, model: a.model, score: a.score });

/** Indexes of the assessments by score, highest first; ties keep the route's order. */
export function byScore(a: readonly Assessment[]): number[] {
  return a.map((_, i) => i).sort((i, j) => a[j].score - a[i].score || i - j);
}

/**
 * K joint posterior draws (one Normal per candidate per draw, seeded; quickNormal), each resolved to
 * a winner by `choose`; returns how often each candidate won.
 */
export function drawWinners(a: readonly Assessment[], k: number, random: () => number, choose: (theta: Float64Array) => number): Int32Array {
  return drawWinnersUnder(a, k, random, choose, [a.map(() => 1)])[0];
}

/**
 * K joint draws as drawWinners, each resolved under several spreads at once: draw d's standard
 * normals z are shared, and under spread j candidate i draws score + scales[j][i]·√variance·z. The
 * random source is consumed exactly as by drawWinners, so scales [1, …] reproduces its counts.
 */
export function drawWinnersUnder(
  a: readonly Assessment[],
  k: number,
  random: () => number,
  choose: (theta: Float64Array) => number,
  scales: ReadonlyArray<readonly number[]>,
): Int32Array[] {
  const mean = Float64Array.from(a, (x) => x.score);
  const sd = scales.map((sc) => Float64Array.from(a, (x, i) => sc[i] * Math.sqrt(x.variance)));
  const z = new Float64Array(a.length);
  const theta = new Float64Array(a.length);
  const wins = scales.map(() => new Int32Array(a.length));
  for (let d = 0; d < k; d++) {
    for (let i = 0; i < a.length; i++) z[i] = quickNormal(random);
    for (let j = 0; j < scales.length; j++) {
      for (let i = 0; i < a.length; i++) theta[i] = mean[i] + sd[j][i] * z[i];
      wins[j][choose(theta)]++;
    }
  }
  return wins;
}

/**
 * The decaying exploration of live Thompson sampling (routing.exploration; README "Routing that
 * learns"): the factor by which a candidate's posterior standard deviation is scaled in its live
 * draw,
 *
 *   s(n) = max(floor, 1/√(1 + n/decay_samples)),   n = the organisation's samples for the candidate.
 *
 * The live draw is then Normal(score, s²·σ²/(n0 + n)): for n ≪ decay_samples the posterior itself
 * (plain Thompson sampling while evidence is thin, so a wrong prior or an unlucky start is still
 * overturned), for n ≫ decay_samples a spread of about σ·√decay_samples/n, shrinking like 1/n
 * instead of 1/√n. Thompson sampling tries a runner-up Δ below the favourite until Δ is a few of the
 * runner-up's draw spreads: about (z·σ/Δ)² samples with the posterior, about z·σ·√decay_samples/Δ
 * with the decay, so near-ties stop costing hundreds of sessions. The decay follows each candidate's
 * own evidence, not the organisation's total: a candidate that is starved of traffic keeps the spread
 * it had, so it is still drawn above the favourite now and then and can win back (a rate that decayed
 * with the total would fade a starved candidate's chances without anything being learned about it,
 * the lock-in of decaying ε-greedy). The floor bounds the decay, so a well-sampled candidate whose
 * samples ran unlucky is still retried now and then (floor 1 turns the decay off). Only live
 * selection, and the exploration_rate_effective that measures it, use s: the posterior, and with it
 * the score, confidence and dry run, are unchanged.
 */
export function explorationScale(n: number, e: RouterParams['exploration']): number {
  return Math.max(e.floor, 1 / Math.sqrt(1 + Math.max(0, n) / e.decay_samples));
}

export const argmax = (theta: ArrayLike<number>): number => {
  let best = 0;
  for (let i = 1; i < theta.length; i++) if (theta[i] > theta[best]) best = i;
  return best;
};

export interface ConfidenceCaps {
  day0: number;
  shared: number;
  insufficient_samples: number;
}

/**
 * The contract's confidence_reason and the cap it puts on the raw probability, first that holds:
 *   single_candidate      one candidate: confidence 1 (nothing to choose between);
 *   cap_day0              the organisation has no samples at all: ≤ caps.day0 (priors only);
 *   cap_shared            the selected candidate's prior is the cross-organisation pool: ≤ caps.shared;
 *   insufficient_samples  the selected candidate has n < n_min: ≤ caps.insufficient_samples;
 *   ok                    the raw probability, uncapped.
 */
export function capConfidence(
  raw: number,
  candidates: number,
  orgSamples: number,
  selected: Assessment,
  nMin: number,
  caps: ConfidenceCaps,
): { confidence: number; reason: ConfidenceReason } {
  if (candidates <= 1) return { confidence: 1, reason: 'single_candidate' };
  if (orgSamples <= 0) return { confidence: Math.min(raw, caps.day0), reason: 'cap_day0' };
  if (selected.priorSource === 'pool') return { confidence: Math.min(raw, caps.shared), reason: 'cap_shared' };
  if (selected.n < nMin) return { confidence: Math.min(raw, caps.insufficient_samples), reason: 'insufficient_samples' };
  return { confidence: raw, reason: 'ok' };
}

const FIVE_MINUTES_MS = 5 * 60 * 1000;

/** Contract "Explain response": exact below 10, else the 10 or 50 threshold reached. */
export function bucketRegressions(n: number): RoutingEvidence['recentRegressions'] {
  if (n < 10) return { kind: 'exact', exact: n };
  return { kind: 'at_least', at_least: n >= 50 ? 50 : 10 };
}

const roundedIso = (d: Date) => new Date(Math.round(d.getTime() / FIVE_MINUTES_MS) * FIVE_MINUTES_MS).toISOString();

/**
 * The evidence behind a decision: the selected candidate's samples, variance, regressions and the
 * change the detector found for it (when one was, in the last 7 days), the top-2 gap, and whether the
 * pick is a re-try of a starved or rising candidate.
 */
export function evidenceOf(selected: Assessment, all: readonly Assessment[], retry?: RetryReason): RoutingEvidence {
  const order = byScore(all);
  const gap = order.length > 1 ? all[order[0]].score - all[order[1]].score : 0;
  const last = selected.regressions[0];
  const evidence: RoutingEvidence = {
    samples: selected.n,
    top2ScoreGap: gap,
    outcomeVariance: selected.outcomeVariance,
    recentRegressions: bucketRegressions(selected.regressions.length),
    lastRegressionAt: last ? roundedIso(last) : null,
  };
  if (selected.change) {
    evidence.lastChange = { direction: selected.change.direction, since: roundedIso(selected.change.since), detectedAt: roundedIso(selected.change.detectedAt) };
  }
  if (retry) evidence.retry = retry;
  return evidence;
}

export type RetryReason = 'starved' | 'rising';

/**
 * A steady rise statistic (model-stats.repository.ts LOAD) at least this share of the alarm threshold
 * is followed up by re-tries: one sample 1.5 standard deviations above the reference reaches it (with
 * the detector's k = 0.25 and h = 25), which about one in fifteen samples of an unchanged model does.
 */
export const RISE_FOLLOW_UP = 0.05;

/** Thompson sampling already serves a candidate whose live draw reaches the favourite's score within this many spreads: no follow-up needed. */
const WITHIN_REACH = 2;

/**
 * Starved candidates re-tried (routing.retry_starved; README "Routing that learns"). Thompson
 * sampling stops serving a candidate whose posterior sits far below the favourite's, and a model that
 * is never served cannot show that it got better: the exploration floor does not reach it. So a
 * candidate other than the pick is re-tried when
 *   starved  it has served before, but none of the organisation's last `after_requests` requests, or
 *            none for `after_seconds`; or its outcome test is held (cusum.ts: a re-try's answers tested
 *            against what the model was) and has no answer yet or its answers lean to "as before":
 *            for a `share` of the requests;
 *   rising   its outcome test has a steady rise at least RISE_FOLLOW_UP of the way to an alarm (the
 *            re-try's answers ran above its record), or is held and its answers lean to a rise, and
 *            its live draws do not reach the favourite (else Thompson sampling serves it already): for
 *            a `rising_share` of the requests, so the few samples that confirm a rise come in tens of
 *            sessions rather than thousands;
 * the rising one with the highest statistic, the held or else the longest starved one, each in its
 * own share of u (together at most `rising_share` + `share`). A held test is what costs: most holds
 * are of a model that did not change, served until its test says so, and answers come a beat after
 * the requests. Followed up from the hold on, an unchanged model was served about twice the sessions
 * its test's answers needed (the follow-ups of the beats until an answer came); at the starved share
 * until an answer leans to a rise, about what they need, and a rise is followed up from its first
 * answer above the record on. u is a uniform drawn from the
 * request id, not from the live random source: the draws of every other decision are unchanged, and
 * explain shows what chat would do for the same id. Returns the candidate to put first, or null.
 */
export function retryPick(
  a: readonly Assessment[],
  winner: number,
  u: number,
  now: Date,
  p: RouterParams['retry_starved'],
  e: RouterParams['exploration'],
): { index: number; reason: RetryReason } | null {
  if (!p.enabled) return null;
  let rising: { index: number; key: number } | null = null;
  let starved: { index: number; key: number } | null = null;
  /** A held test waiting for an answer or leaning to "as before" (the first such): it takes the starved turns. */
  let held: number | null = null;
  for (let i = 0; i < a.length; i++) {
    if (i === winner) continue;
    const x = a[i];
    const outOfReach = x.score + WITHIN_REACH * explorationScale(x.n, e) * Math.sqrt(x.variance) < a[winner].score;
    const leansUp = x.riseTesting ? x.riseEvidence > 0 : x.riseEvidence >= RISE_FOLLOW_UP;
    if (leansUp && outOfReach) {
      if (!rising || x.riseEvidence > rising.key) rising = { index: i, key: x.riseEvidence };
      continue;
    }
    if (x.riseTesting && outOfReach && (!x.served || x.served.requestsSince < p.after_requests)) {
      // Its test ends first, at the starved share. For a gap at most: a test whose answers do not
      // come (feedback is rare) must not keep the other starved candidates from their turns; it is
      // then one of them.
      held ??= i;
      continue;
    }
    if (!x.served) continue;
    const idleSeconds = (now.getTime() - x.served.lastAt.getTime()) / 1000;
    if (x.served.requestsSince >= p.after_requests || idleSeconds >= p.after_seconds) {
      if (!starved || x.served.requestsSince > starved.key) starved = { index: i, key: x.served.requestsSince };
    }
  }
  // Disjoint shares of u: a candidate being followed up must not take the starved one's turns.
  const risingShare = rising ? p.rising_share : 0;
  if (rising && u < risingShare) return { index: rising.index, reason: 'rising' };
  const retried = held ?? starved?.index;
  if (retried !== undefined && u >= risingShare && u < risingShare + p.share) return { index: retried, reason: 'starved' };
  return null;
}
