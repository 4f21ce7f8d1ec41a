import { RoutingService } from '../routing.service';
import type { RoutingDecision, RoutingInput } from '../routing.types';
import { FakeRegressions, FakeStats, FixedClock, makeConfig, makeInput, seededRandom } from '../../../test/support/kit';
import { explorationScale } from './learned-score';

const NOW = new Date('2025-01-10T12:02:29.000Z');
const DAY = 24 * 3600 * 1000;

/** The hand computations below use n0 = 10 and prior_variance = .05 (not the defaults, 2 and .04). */
const yaml = (routing = '', targets = '[p/good, p/plain]') => `
providers:
  p: { family: mock }
models:
  good:  { provider: p, quality: 0.6, manual_score: 0.8 }
  plain: { provider: p, quality: 0.5 }
  other: { provider: p, quality: 0.5 }
routes:
  - { name: learn, models: [auto], strategy: feedback_driven, targets: ${targets} }
routing: { n0: 10, prior_variance: 0.05${routing ? `, ${routing}` : ''} }
`;

function setup(opts: { yaml?: string } = {}) {
  const stats = new FakeStats();
  const regressions = new FakeRegressions();
  const clock = new FixedClock(NOW);
  const service = new RoutingService(makeConfig(opts.yaml ?? yaml()), stats, regressions, clock);
  const route = (overrides: Partial<RoutingInput> = {}): RoutingDecision => service.route(makeInput(overrides));
  return { stats, regressions, clock, service, route };
}

const scoreOf = (d: RoutingDecision, model: string) => d.candidates.find((c) => c.model === model)!.score!;

/** Φ, the standard normal CDF (Abramowitz–Stegun 7.1.26, |error| < 1.5e-7). */
function phi(x: number): number {
  const t = 1 / (1 + 0.3275911 * (Math.abs(x) / Math.SQRT2));
  const erf = 1 - t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))) * Math.exp(-(x * x) / 2);
  return x >= 0 ? (1 + erf) / 2 : (1 - erf) / 2;
}

describe('feedback_driven', () => {
  it('computes the posterior means and evidence by hand', () => {
    const { stats, route } = setup();
    stats.set({ orgId: 'acme', provider: 'p', model: 'good', n: 50, outcomeMean: 0.7, outcomeVar: 0.04, successRate: 1, requests: 60, latencyP50Ms: 1000 });
    /*
     * good: n = 50 → phase learning (20 ≤ n < 200), w = {session .4, auto .1, manual .25, benchmark .25}
     *   auto = success 1 × min(1, 2000 / 1000) = 1
     *   a = .4 / (.4 + .1) = .8;  ō = .8 × .7 + .2 × 1 = .76;  s² = .8² × .04 = .0256
     *   prior m0 = (.25 × .8 + .25 × .6) / .5 = .7   (manual .8, benchmark .6)
     *   μ = (10 × .7 + 50 × .76) / 60 = 45 / 60 = .75
     *   σ² = max(.01, (50 × .0256 + 10 × .05) / 60) = 1.78 / 60 = .0296667;  var = σ² / 60 = .000494444
     * plain: no stats → n = 0, cold_start, prior = benchmark .5 (no manual score) → μ = .5, var = .05 / 10 = .005
     * evidence: samples 50, top-2 gap .75 − .5 = .25, outcome variance .04, no regressions
     * confidence: P(θ_good > θ_plain) = Φ(.25 / √(.000494444 + .005)) = Φ(3.373) ≈ .9996, uncapped (ok)
     */
    const d = route();
    expect(d.strategyId).toBe('feedback_driven');
    expect(d.plan).toEqual([{ provider: 'p', model: 'good' }, { provider: 'p', model: 'plain' }]);
    expect(scoreOf(d, 'good')).toBeCloseTo(0.75, 12);
    expect(scoreOf(d, 'plain')).toBeCloseTo(0.5, 12);
    expect(d.insight.phase).toBe('learning');
    expect(d.insight.weights).toEqual({ session: 0.4, auto: 0.1, manual: 0.25, benchmark: 0.25 });
    expect(d.insight.evidence).toEqual({
      samples: 50,
      top2ScoreGap: expect.closeTo(0.25, 12),
      outcomeVariance: 0.04,
      recentRegressions: { kind: 'exact', exact: 0 },
      lastRegressionAt: null,
    });
    expect(d.insight.confidenceReason).toBe('ok');
    expect(d.insight.confidence).toBeGreaterThan(0.99);
    expect(d.insight.explorationRateEffective).toBeCloseTo(1 - d.insight.confidence!, 12);
    expect(d.insight.usedSharedPoolPrior).toBe(false);
    expect(d.insight.routerInvoked).toBe(true);
  });

  it('estimates confidence as P(selected is best) under the posterior (calibrated against the closed form)', () => {
    const { stats, route } = setup({ yaml: yaml('confidence_draws: 20000') });
    stats.set({ orgId: 'acme', provider: 'p', model: 'good', n: 40, outcomeMean: 0.62, outcomeVar: 0.08, requests: 40 });
    stats.set({ orgId: 'acme', provider: 'p', model: 'plain', n: 30, outcomeMean: 0.6, outcomeVar: 0.1, requests: 30 });
    /*
     * Both learning (w .4/.1/.25/.25, a = .8, auto = 1):
     *   good  ō = .8 × .62 + .2 = .696; m0 = .7;  μ = (7 + 40 × .696)/50 = 34.84/50 = .6968;  σ² = (40 × .64 × .08 + .5)/50 = .05096; var = σ²/50
     *   plain ō = .8 × .6 + .2 = .68;   m0 = .5;  μ = (5 + 30 × .68)/40 = 25.4/40 = .635;    σ² = (30 × .64 × .1 + .5)/40 = .0605;  var = σ²/40
     *   closed form Φ(.0618 / √(.0010192 + .0015125)) = Φ(1.228) ≈ .89
     * exploration_rate_effective is measured on the live draws, whose variances the default decay (35, .3)
     * scales by 1/(1 + 40/35) = 35/75 for good and 1/(1 + 30/35) = 35/65 for plain:
     * 1 − Φ(.0618 / √(.0010192 × 35/75 + .0015125 × 35/65)) ≈ .040
     */
    const vGood = 0.05096 / 50;
    const vPlain = 0.0605 / 40;
    const d = route();
    expect(scoreOf(d, 'good')).toBeCloseTo(0.6968, 12);
    expect(scoreOf(d, 'plain')).toBeCloseTo(0.635, 12);
    const closed = phi((0.6968 - 0.635) / Math.sqrt(vGood + vPlain));
    expect(d.insight.confidenceReason).toBe('ok');
    expect(Math.abs(d.insight.confidence! - closed)).toBeLessThan(0.015);
    const live = phi((0.6968 - 0.635) / Math.sqrt((vGood * 35) / 75 + (vPlain * 35) / 65));
    expect(1 - live).toBeCloseTo(0.04, 2);
    expect(Math.abs(d.insight.explorationRateEffective - (1 - live))).toBeLessThan(0.01);
  });

  it.each([
    [0, 'cold_start', { session: 0.24, auto: 0.06, manual: 0.35, benchmark: 0.35 }],
    [19, 'cold_start', { session: 0.24, auto: 0.06, manual: 0.35, benchmark: 0.35 }],
    [20, 'learning', { session: 0.4, auto: 0.1, manual: 0.25, benchmark: 0.25 }],
    [199, 'learning', { session: 0.4, auto: 0.1, manual: 0.25, benchmark: 0.25 }],
    [200, 'steady', { session: 0.56, auto: 0.14, manual: 0.15, benchmark: 0.15 }],
  ])('with %i samples the phase is %s and sets the weights', (n, phase, weights) => {
    const { stats, route } = setup();
    stats.set({ orgId: 'acme', provider: 'p', model: 'other', n: 100, outcomeMean: 0.5 });
    if (n > 0) stats.set({ orgId: 'acme', provider: 'p', model: 'good', n, outcomeMean: 0.9, outcomeVar: 0.02 });
    const d = route();
    expect(d.plan[0].model).toBe('good');
    expect(d.insight.phase).toBe(phase);
    expect(d.insight.weights).toEqual(weights);
  });

  it('blends session and auto the same way in every phase by default, so a score does not jump at n_min or n_steady', () => {
    const { stats, route } = setup();
    const at = (n: number) => {
      stats.set({ orgId: 'acme', provider: 'p', model: 'good', n, outcomeMean: 0.6, outcomeVar: 0.04 });
      return scoreOf(route(), 'good');
    };
    /*
     * a = .8 in every phase, auto = 1: ō = .8 × .6 + .2 = .68 whatever n; m0 = .7 (manual .8, benchmark .6, 1:1 in every phase)
     *   n = 19 (cold_start)  μ = (10 × .7 + 19 × .68) / 29 = 19.92 / 29
     *   n = 20 (learning)    μ = (7 + 13.6) / 30 = 20.6 / 30
     *   n = 199 (learning)   μ = (7 + 135.32) / 209 = 142.32 / 209
     *   n = 200 (steady)     μ = (7 + 136) / 210 = 143 / 210
     * (With the former .15/.15 cold_start weights, a = .5 and n = 19 would score (7 + 19 × .8) / 29 = .766: a jump of .08.)
     */
    expect(at(19)).toBeCloseTo(19.92 / 29, 12);
    expect(at(20)).toBeCloseTo(20.6 / 30, 12);
    expect(at(199)).toBeCloseTo(142.32 / 209, 12);
    expect(at(200)).toBeCloseTo(143 / 210, 12);
  });

  it('lowers the catalogue prior by the measured auto shortfall: a model that only fails (rescued by fallback) loses before any feedback', () => {
    const { stats, route } = setup();
    /*
     * good, no feedback (n = 0, cold_start: w = {session .24, auto .06, manual .35, benchmark .35}, a = .8):
     *   catalogue prior (.35 × .8 + .35 × .6) / .7 = .7
     *   every request failed (failed fallback attempts count as requests): auto = 0 → prior .7 − .2 × (1 − 0) = .5
     *   half failed and p50 4 s against the 2 s target: auto = .5 × .5 = .25 → .7 − .2 × .75 = .55
     *   healthy traffic: auto = 1 → .7, unchanged
     * plain: no traffic → .5
     */
    stats.set({ orgId: 'acme', provider: 'p', model: 'good', n: 0, requests: 12, successRate: 0 });
    expect(scoreOf(route({ mode: 'dry-run' }), 'good')).toBeCloseTo(0.5, 12);
    stats.set({ orgId: 'acme', provider: 'p', model: 'good', n: 0, requests: 12, successRate: 0.5, latencyP50Ms: 4000 });
    expect(scoreOf(route({ mode: 'dry-run' }), 'good')).toBeCloseTo(0.55, 12);
    stats.set({ orgId: 'acme', provider: 'p', model: 'good', n: 0, requests: 12, successRate: 1, latencyP50Ms: 900 });
    expect(scoreOf(route({ mode: 'dry-run' }), 'good')).toBeCloseTo(0.7, 12);

    // The posterior keeps the lowered prior as its n0 pseudo-samples: 10 samples of outcome .7 (still
    // cold_start, a = .8), half the requests failed (auto .5): prior .7 − .2 × .5 = .6, ō = .8 × .7 +
    // .2 × .5 = .66, μ = (10 × .6 + 10 × .66) / 20 = .63.
    stats.set({ orgId: 'acme', provider: 'p', model: 'good', n: 10, outcomeMean: 0.7, outcomeVar: 0.04, requests: 30, successRate: 0.5 });
    expect(scoreOf(route({ mode: 'dry-run' }), 'good')).toBeCloseTo(0.63, 12);
  });

  it('weighs a pair whose window restarted at a change point on the same blend before its requests are counted (auto taken as 1), not on its feedback alone', () => {
    const { stats, route } = setup();
    /*
     * good, 30 samples of outcome .7 since a change point, no request counted yet (they count from
     * the first whole hour after it); learning phase, a = .8, m0 = .7:
     *   auto taken as 1: ō = .8 × .7 + .2 = .76, μ = (10 × .7 + 30 × .76) / 40 = 29.8 / 40
     *   without a change point the session signal alone: ō = .7, μ = (7 + 21) / 40 = .7
     */
    const since = new Date(NOW.getTime() - 600_000);
    stats.set({ orgId: 'acme', provider: 'p', model: 'good', n: 30, outcomeMean: 0.7, outcomeVar: 0.04, requests: 0, successRate: 0, change: { since, direction: 'rise', detectedAt: since } });
    expect(scoreOf(route({ mode: 'dry-run' }), 'good')).toBeCloseTo(29.8 / 40, 12);
    stats.set({ orgId: 'acme', provider: 'p', model: 'good', n: 30, outcomeMean: 0.7, outcomeVar: 0.04, requests: 0, successRate: 0, change: null });
    expect(scoreOf(route({ mode: 'dry-run' }), 'good')).toBeCloseTo(0.7, 12);
  });

  it('takes the phase boundaries and weights from config', () => {
    const { stats, route } = setup({
      yaml: yaml('n_min: 5, n_steady: 10, weights: { steady: { session: 0.7, auto: 0.1, manual: 0.1, benchmark: 0.1 } }'),
    });
    stats.set({ orgId: 'acme', provider: 'p', model: 'good', n: 10, outcomeMean: 0.9 });
    expect(route().insight).toMatchObject({ phase: 'steady', weights: { session: 0.7, auto: 0.1, manual: 0.1, benchmark: 0.1 } });
  });

  it('uses the shared pool as the prior when the organisation has fewer than n_min samples for the model, and caps with cap_shared', () => {
    const { stats, route } = setup();
    stats.set({ orgId: 'acme', provider: 'p', model: 'other', n: 100, outcomeMean: 0.5 });
    stats.set({ orgId: 'acme', provider: 'p', model: 'good', n: 5, outcomeMean: 0.8, outcomeVar: 0.01 });
    stats.set({ orgId: '*', provider: 'p', model: 'good', n: 100, outcomeMean: 0.9, outcomeVar: 0.01 });
    /*
     * good: n = 5 → cold_start (a = .24/.3 = .8, auto = 1); pool ō = .8 × .9 + .2 × 1 = .92 is the prior;
     * own ō = .8 × .8 + .2 = .84;  μ = (10 × .92 + 5 × .84) / 15 = 13.4 / 15
     */
    const d = route();
    expect(d.plan[0].model).toBe('good');
    expect(scoreOf(d, 'good')).toBeCloseTo(13.4 / 15, 12);
    expect(d.insight.usedSharedPoolPrior).toBe(true);
    expect(d.insight.confidenceReason).toBe('cap_shared');
    expect(d.insight.confidence).toBe(0.75);
  });

  it('ignores a pool with fewer than n_min samples, and stops using the pool once the organisation has n_min', () => {
    const { stats, route } = setup();
    stats.set({ orgId: 'acme', provider: 'p', model: 'other', n: 100 });
    stats.set({ orgId: '*', provider: 'p', model: 'good', n: 19, outcomeMean: 0.1 });
    expect(route().insight.usedSharedPoolPrior).toBe(false);
    stats.set({ orgId: '*', provider: 'p', model: 'good', n: 500, outcomeMean: 0.95 });
    stats.set({ orgId: 'acme', provider: 'p', model: 'good', n: 20, outcomeMean: 0.9 });
    expect(route().insight).toMatchObject({ usedSharedPoolPrior: false, confidenceReason: 'ok' });
  });

  it('caps at day zero (no samples at all for the organisation) with cap_day0, before cap_shared', () => {
    const { stats, route } = setup();
    expect(route().insight).toMatchObject({ confidenceReason: 'cap_day0', phase: 'cold_start' });
    expect(route().insight.confidence).toBeLessThanOrEqual(0.5);
    stats.set({ orgId: '*', provider: 'p', model: 'good', n: 100, outcomeMean: 0.9 });
    expect(route().insight).toMatchObject({ confidenceReason: 'cap_day0', usedSharedPoolPrior: true, confidence: 0.5 });
    // Without a stats snapshot at all (module not wired) it is day zero too.
    const bare = new RoutingService(makeConfig(yaml()));
    expect(bare.route(makeInput()).insight.confidenceReason).toBe('cap_day0');
  });

  it('caps a winner with fewer than n_min samples and no pool with insufficient_samples', () => {
    const { stats, route } = setup();
    stats.set({ orgId: 'acme', provider: 'p', model: 'other', n: 100 });
    stats.set({ orgId: 'acme', provider: 'p', model: 'good', n: 5, outcomeMean: 0.9, outcomeVar: 0.01 });
    const d = route();
    expect(d.plan[0].model).toBe('good');
    expect(d.insight).toMatchObject({ confidenceReason: 'insufficient_samples', confidence: 0.6, usedSharedPoolPrior: false });
  });

  it('reports single_candidate with confidence 1 and no exploration for a lone candidate', () => {
    const { stats, route } = setup({ yaml: yaml('', '[p/good]') });
    stats.set({ orgId: 'acme', provider: 'p', model: 'good', n: 3, outcomeMean: 0.4 });
    const d = route();
    expect(d.insight).toMatchObject({ confidence: 1, confidenceReason: 'single_candidate', explorationRateEffective: 0, routerInvoked: true });
    expect(d.insight.evidence).toMatchObject({ samples: 3, top2ScoreGap: 0 });
  });

  describe('repeatability', () => {
    const close = (s: ReturnType<typeof setup>) => {
      s.stats.set({ orgId: 'acme', provider: 'p', model: 'good', n: 30, outcomeMean: 0.6, outcomeVar: 0.1 });
      s.stats.set({ orgId: 'acme', provider: 'p', model: 'plain', n: 30, outcomeMean: 0.64, outcomeVar: 0.1 });
      return s;
    };

    it('gives the same confidence and exploration for the same request id (draws seeded by it)', () => {
      const a = close(setup());
      const b = close(setup());
      const first = a.route({ requestId: 'req-abc' });
      expect(a.route({ requestId: 'req-abc' }).insight).toEqual(first.insight);
      expect(b.route({ requestId: 'req-abc', random: () => 0.99 }).insight).toEqual(first.insight);
      expect(first.insight.confidence).toBeGreaterThan(0.5);
      expect(first.insight.confidence).toBeLessThan(0.95);
      const others = new Set(['r1', 'r2', 'r3', 'r4', 'r5'].map((id) => a.route({ requestId: id }).insight.confidence));
      expect(others.size).toBeGreaterThan(1);
    });

    it('dry-run orders by posterior mean whatever the random source; live samples', () => {
      const s = close(setup());
      const dry = [0.01, 0.5, 0.99].map((r) => s.route({ random: () => r }).plan);
      expect(dry[1]).toEqual(dry[0]);
      expect(dry[2]).toEqual(dry[0]);
      const rnd = seededRandom(7);
      const firsts = new Set(Array.from({ length: 50 }, (_, i) => s.route({ mode: 'live', requestId: `r${i}`, random: rnd }).plan[0].model));
      expect(firsts).toEqual(new Set(['good', 'plain']));
      // The same seed gives the same live order.
      const order = (seed: number) => Array.from({ length: 20 }, (_, i) => s.route({ mode: 'live', requestId: `r${i}`, random: seededRandom(seed) }).plan[0].model);
      expect(order(3)).toEqual(order(3));
    });
  });

  /*
   * A 0/1 outcome world: the worse model has the higher prior. With one or two unlucky samples a 0/1
   * outcome's observed variance is 0, so the posterior (σ² from prior_variance .04 pseudo-samples) is
   * much narrower than a 0/1 outcome's variance (~.2) warrants, and Thompson sampling can abandon the
   * better model: over 200 seeds of this world it ends on the worse one in 7 % of runs without the decay
   * (floor 1) and in 8 % with the default decay (35, .3), with the same mean regret. So the claim is
   * statistical: of 20 seeded runs, at least 17 converge (both variants: 18).
   */
  it('Thompson sampling converges to the better model, against a prior that favours the worse one', () => {
    const world = `
providers:
  p: { family: mock }
models:
  good: { provider: p, quality: 0.5 }
  bad:  { provider: p, quality: 0.8 }
routes:
  - { name: learn, models: [auto], strategy: feedback_driven, targets: [p/bad, p/good] }
`;
    const mean = (xs: number[]) => xs.reduce((x, y) => x + y, 0) / xs.length;
    const runOnce = (k: number) => {
      const s = setup({ yaml: world });
      const truth: Record<string, number> = { good: 0.75, bad: 0.6 };
      const acc: Record<string, { n: number; sum: number; sumSq: number }> = { good: { n: 0, sum: 0, sumSq: 0 }, bad: { n: 0, sum: 0, sumSq: 0 } };
      const pick = seededRandom(11 + 2 * k);
      const outcomes = seededRandom(12 + 2 * k);
      const chosen: string[] = [];
      const exploration: number[] = [];
      for (let round = 0; round < 2000; round++) {
        const d = s.route({ mode: 'live', requestId: `r${round}`, random: pick });
        const model = d.plan[0].model;
        chosen.push(model);
        if (round < 50 || round >= 1950) exploration.push(d.insight.explorationRateEffective);
        const y = outcomes() < truth[model] ? 1 : 0;
        const a = acc[model];
        a.n++;
        a.sum += y;
        a.sumSq += y * y;
        const m = a.sum / a.n;
        s.stats.set({ orgId: 'acme', provider: 'p', model, n: a.n, outcomeMean: m, outcomeVar: a.sumSq / a.n - m * m, requests: a.n });
      }
      const share = (from: number, to: number) => chosen.slice(from, to).filter((m) => m === 'good').length / (to - from);
      return { early: share(0, 50), late: share(1500, 2000), explorationEarly: mean(exploration.slice(0, 50)), explorationLate: mean(exploration.slice(50)) };
    };
    const runs = Array.from({ length: 20 }, (_, k) => runOnce(k));
    expect(mean(runs.map((r) => r.early))).toBeLessThan(0.5); // the prior first sends traffic to "bad"
    const converged = runs.filter((r) => r.late >= 0.9);
    expect(converged.length).toBeGreaterThanOrEqual(17);
    // Exploration decays as the posteriors narrow (and the live draws with them).
    for (const r of converged) expect(r.explorationLate).toBeLessThan(r.explorationEarly);
  });

  describe('decaying exploration (routing.exploration)', () => {
    it('scales a candidate\'s live spread by max(floor, 1/√(1 + n/decay_samples)): shrinking with its samples, never below the floor', () => {
      const e = { decay_samples: 50, floor: 0.3 };
      expect(explorationScale(0, e)).toBe(1);
      expect(explorationScale(50, e)).toBeCloseTo(1 / Math.SQRT2, 12);
      expect(explorationScale(150, e)).toBeCloseTo(0.5, 12);
      expect(explorationScale(400, e)).toBeCloseTo(1 / 3, 12);
      expect(explorationScale(505, e)).toBeGreaterThan(0.3); // 1/√11.1 = .30015; the floor binds from n = 50 × (1/.3² − 1) = 505.6
      expect(explorationScale(506, e)).toBe(0.3);
      expect(explorationScale(10_000, e)).toBe(0.3);
      for (let n = 0; n < 2000; n += 7) expect(explorationScale(n + 7, e)).toBeLessThanOrEqual(explorationScale(n, e));
      expect(explorationScale(1e9, { decay_samples: 1, floor: 0.01 })).toBe(0.01);
      expect(explorationScale(1e9, { decay_samples: 50, floor: 1 })).toBe(1); // floor 1: plain Thompson sampling
    });

    /*
     * good n = 400 (steady: .56/.14/.15/.15, a = .8, auto = 1), plain n = 100 (learning, a = .8, auto = 1); n0 = 10, prior_variance .05:
     *   good   ō = .8 × .62 + .2 = .696; m0 = .7;  μ = (7 + 278.4)/410 = 285.4/410;  σ² = (400 × .64 × .08 + .5)/410 = 20.98/410; var = σ²/410
     *   plain  ō = .8 × .6 + .2 = .68;   m0 = .5;  μ = (5 + 68)/110 = 73/110;        σ² = (100 × .64 × .1 + .5)/110 = 6.9/110;   var = σ²/110
     *   gap Δ = .0324612; posterior sd of the difference √(.00012481 + .00057025) = .026365
     *   plain Thompson sampling picks plain with P = Φ(−Δ/.026365) = Φ(−1.231) ≈ .109 (= 1 − confidence)
     *   decay { decay_samples: 50, floor: .3 }: s_good = max(.3, 1/√9) = 1/3, s_plain = 1/√3; live sd of the difference
     *   √(.00012481/9 + .00057025/3) = .014281, so live picks plain with P = Φ(−2.273) ≈ .0115
     */
    const twoModels = (exploration = '{ decay_samples: 50, floor: 0.3 }') => {
      const s = setup({ yaml: yaml(`confidence_draws: 20000, exploration: ${exploration}`) });
      s.stats.set({ orgId: 'acme', provider: 'p', model: 'good', n: 400, outcomeMean: 0.62, outcomeVar: 0.08 });
      s.stats.set({ orgId: 'acme', provider: 'p', model: 'plain', n: 100, outcomeMean: 0.6, outcomeVar: 0.1 });
      return s;
    };
    const vGood = 20.98 / 410 / 410;
    const vPlain = 6.9 / 110 / 110;
    const gap = 285.4 / 410 - 73 / 110;
    const livePlainShare = (s: ReturnType<typeof setup>, seed: number, picks = 4000) => {
      const rnd = seededRandom(seed);
      let plain = 0;
      for (let i = 0; i < picks; i++) if (s.route({ mode: 'live', requestId: `r${i}`, random: rnd }).plan[0].model === 'plain') plain++;
      return plain / picks;
    };

    it('live draws use the scaled spread: the runner-up is picked at Φ(−Δ/√(s₁²v₁ + s₂²v₂)), not at the posterior\'s rate', () => {
      const decayed = phi(-gap / Math.sqrt(vGood / 9 + vPlain / 3));
      const plainTs = phi(-gap / Math.sqrt(vGood + vPlain));
      expect(decayed).toBeCloseTo(0.0115, 3);
      expect(plainTs).toBeCloseTo(0.109, 3);
      expect(Math.abs(livePlainShare(twoModels(), 5) - decayed)).toBeLessThan(0.006); // binomial sd .0017
      expect(Math.abs(livePlainShare(twoModels('{ floor: 1 }'), 5) - plainTs)).toBeLessThan(0.02); // sd .005
    });

    it('keeps confidence on the unscaled posterior and measures exploration_rate_effective on the live (scaled) draws', () => {
      const decayed = twoModels().route({ requestId: 'req-x' }).insight;
      const plainTs = twoModels('{ floor: 1 }').route({ requestId: 'req-x' }).insight;
      // The same seeded draws: confidence is identical with and without the decay.
      expect(decayed.confidence).toBe(plainTs.confidence);
      expect(Math.abs(decayed.confidence! - phi(gap / Math.sqrt(vGood + vPlain)))).toBeLessThan(0.01);
      // Exploration: the live distribution's rate, ≈ .0115, where plain Thompson sampling explores ≈ .109 = 1 − confidence.
      expect(Math.abs(decayed.explorationRateEffective - phi(-gap / Math.sqrt(vGood / 9 + vPlain / 3)))).toBeLessThan(0.004);
      expect(plainTs.explorationRateEffective).toBeCloseTo(1 - plainTs.confidence!, 12);
      // …and it is what live traffic does: the measured live share agrees with the reported rate.
      expect(Math.abs(livePlainShare(twoModels(), 9) - decayed.explorationRateEffective)).toBeLessThan(0.006);
    });

    it('respects the floor: with decay_samples 1 both spreads are floored, and the rate is Φ(−Δ/(floor·sd))', () => {
      // s = max(.5, 1/√401) = .5 and max(.5, 1/√101) = .5: live sd of the difference .5 × .026365 → Φ(−2.462) ≈ .0069
      const s = twoModels('{ decay_samples: 1, floor: 0.5 }');
      const expected = phi(-gap / (0.5 * Math.sqrt(vGood + vPlain)));
      expect(expected).toBeCloseTo(0.0069, 3);
      expect(Math.abs(s.route({ requestId: 'req-y' }).insight.explorationRateEffective - expected)).toBeLessThan(0.003);
      expect(Math.abs(livePlainShare(s, 13) - expected)).toBeLessThan(0.005);
    });

    it('leaves a starved candidate its full spread (the decay follows each candidate\'s own samples, not the total)', () => {
      // Default decay (35, .3). plain has 2 samples, good 2,000: plain's scale is 1/√(1 + 2/35) ≈ .97, so it is still drawn above good now and then.
      const s = setup({ yaml: yaml('confidence_draws: 20000') });
      s.stats.set({ orgId: 'acme', provider: 'p', model: 'good', n: 2000, outcomeMean: 0.62, outcomeVar: 0.08 });
      s.stats.set({ orgId: 'acme', provider: 'p', model: 'plain', n: 2, outcomeMean: 0.6, outcomeVar: 0.1 });
      const d = s.route({ requestId: 'req-z' });
      const a = d.candidates;
      expect(a.map((c) => c.model)).toEqual(['good', 'plain']);
      /*
       * good (steady): μ = (7 + 2000 × .696)/2010, σ² = (2000 × .0512 + .5)/2010, var = σ²/2010; scale .3 (floor)
       * plain (cold_start, a = .8): ō = .68, μ = (5 + 1.36)/12 = .53, σ² = (2 × .064 + .5)/12 = .052333, var = σ²/12; scale² 35/37
       */
      const muGood = (7 + 2000 * 0.696) / 2010;
      const varGood = (2000 * 0.0512 + 0.5) / 2010 / 2010;
      const varPlain = (2 * 0.064 + 0.5) / 12 / 12;
      const expected = phi(-(muGood - 6.36 / 12) / Math.sqrt(0.09 * varGood + (varPlain * 35) / 37));
      expect(expected).toBeCloseTo(0.0049, 4);
      expect(Math.abs(d.insight.explorationRateEffective - expected)).toBeLessThan(0.002);
      // Plain Thompson sampling: .0061. A decay on the organisation's total (2,002 samples, both at the
      // floor) would have left plain ≈ 3e-17: starved for good, with nothing learned about it.
      expect(phi(-(muGood - 6.36 / 12) / Math.sqrt(varGood + varPlain))).toBeCloseTo(0.0061, 4);
      expect(phi(-(muGood - 6.36 / 12) / (0.3 * Math.sqrt(varGood + varPlain)))).toBeLessThan(1e-9);
    });

    it('does not touch dry-run: scores and order are the posterior means whatever the decay', () => {
      const a = twoModels().route({ random: () => 0.3 });
      const b = twoModels('{ decay_samples: 1, floor: 0.01 }').route({ random: () => 0.3 });
      expect(b.plan).toEqual(a.plan);
      expect(b.candidates).toEqual(a.candidates);
      expect(scoreOf(a, 'good')).toBeCloseTo(285.4 / 410, 12);
      expect(scoreOf(a, 'plain')).toBeCloseTo(73 / 110, 12);
    });

    it('is deterministic under a seeded random source', () => {
      const s = twoModels();
      const picks = (seed: number) => {
        const rnd = seededRandom(seed);
        return Array.from({ length: 300 }, (_, i) => s.route({ mode: 'live', requestId: `r${i}`, random: rnd }).plan.map((t) => t.model).join(','));
      };
      expect(picks(21)).toEqual(picks(21));
      expect(new Set(picks(21)).size).toBe(2);
    });
  });

  describe('regressions', () => {
    it('lower the score by penalty × (1 − age / 7 days), and are counted and dated in the evidence', () => {
      const { stats, regressions, route } = setup();
      stats.set({ orgId: 'acme', provider: 'p', model: 'good', n: 50, outcomeMean: 0.7, outcomeVar: 0.04, latencyP50Ms: 1000 });
      const before = scoreOf(route(), 'good');
      regressions
        .add('acme', 'p', 'good', new Date(NOW.getTime() - DAY))
        .add('acme', 'p', 'good', new Date(NOW.getTime() - 3 * DAY))
        .add('acme', 'p', 'good', new Date(NOW.getTime() - 8 * DAY)) // outside the 7-day window
        .add('other-org', 'p', 'good', new Date(NOW.getTime() - DAY)); // another organisation's
      // penalty = .05 × (1 − 1/7) + .05 × (1 − 3/7) = .05 × 10/7 = .0714286
      const d = route();
      expect(scoreOf(d, 'good')).toBeCloseTo(before - 0.05 * (10 / 7), 12);
      expect(d.insight.evidence).toMatchObject({
        recentRegressions: { kind: 'exact', exact: 2 },
        // 2025-01-09T12:02:29Z to the nearest 5 minutes
        lastRegressionAt: '2025-01-09T12:00:00.000Z',
      });
    });

    it('rounds the last regression half up to the nearest 5 minutes', () => {
      const { stats, regressions, route } = setup();
      stats.set({ orgId: 'acme', provider: 'p', model: 'good', n: 50, outcomeMean: 0.9 });
      regressions.add('acme', 'p', 'good', new Date('2025-01-10T10:02:30.000Z'));
      expect(route().insight.evidence!.lastRegressionAt).toBe('2025-01-10T10:05:00.000Z');
    });

    it('cap the penalty at max_penalty and bucket the count (exact < 10, at least 10, at least 50)', () => {
      const { stats, regressions, route } = setup();
      stats.set({ orgId: 'acme', provider: 'p', model: 'good', n: 50, outcomeMean: 0.95 });
      const base = scoreOf(route(), 'good');
      const add = (k: number) => {
        for (let i = 0; i < k; i++) regressions.add('acme', 'p', 'good', new Date(NOW.getTime() - i * 60_000));
      };
      add(9);
      expect(route().insight.evidence!.recentRegressions).toEqual({ kind: 'exact', exact: 9 });
      add(1);
      expect(route().insight.evidence!.recentRegressions).toEqual({ kind: 'at_least', at_least: 10 });
      expect(scoreOf(route(), 'good')).toBeCloseTo(base - 0.2, 12);
      add(39);
      expect(route().insight.evidence!.recentRegressions).toEqual({ kind: 'at_least', at_least: 10 });
      add(1);
      expect(route().insight.evidence!.recentRegressions).toEqual({ kind: 'at_least', at_least: 50 });
    });

    it('can turn the decision: of two equal models, the one with recent regressions loses', () => {
      const { stats, regressions, route } = setup({ yaml: yaml('', '[p/plain, p/other]') });
      for (const model of ['plain', 'other']) stats.set({ orgId: 'acme', provider: 'p', model, n: 100, outcomeMean: 0.7, outcomeVar: 0.05 });
      expect(route().plan[0].model).toBe('plain');
      regressions.add('acme', 'p', 'plain', new Date(NOW.getTime() - 3600_000));
      expect(route().plan[0].model).toBe('other');
    });
  });
});
