import { RoutingService } from '../routing.service';
import type { RoutingDecision, RoutingInput } from '../routing.types';
import { FakeStats, FixedClock, makeConfig, makeInput } from '../../../test/support/kit';
import { estimateCost, estimateTokens } from './cost';
import { cheapestWithinTolerance } from './smart-cost.strategy';

/*
 * Day-zero scores are the catalogue priors (cold_start, no manual score: the benchmark `quality`):
 * cheap .70, mid .73, premium .80, nocost .79.
 * Prices per million tokens (input / output): cheap 1 / 2, mid 1.4 / 2.8 (1.4 × cheap), premium 10 / 30.
 */
const yaml = (opts: { tolerance?: number; strategy?: string; targets?: string; constraints?: string } = {}) => `
providers:
  p: { family: mock }
models:
  cheap:   { provider: p, quality: 0.70, cost: { input_per_mtok: 1, output_per_mtok: 2 } }
  mid:     { provider: p, quality: 0.73, cost: { input_per_mtok: 1.4, output_per_mtok: 2.8 } }
  premium: { provider: p, quality: 0.80, cost: { input_per_mtok: 10, output_per_mtok: 30 } }
  nocost:  { provider: p, quality: 0.79 }
routes:
  - name: r
    models: [auto]
    strategy: ${opts.strategy ?? 'smart_cost'}
    targets: ${opts.targets ?? '[p/premium, p/mid, p/cheap]'}
${opts.constraints ? `    constraints: ${opts.constraints}\n` : ''}routing: { smart_cost: { tolerance: ${opts.tolerance ?? 0.05} } }
`;

function setup(opts: Parameters<typeof yaml>[0] = {}) {
  const stats = new FakeStats();
  const service = new RoutingService(makeConfig(yaml(opts)), stats, undefined, new FixedClock(new Date('2025-01-10T12:00:00Z')));
  return { stats, route: (o: Partial<RoutingInput> = {}): RoutingDecision => service.route(makeInput(o)) };
}

const models = (d: RoutingDecision) => d.plan.map((t) => t.model);

describe('cheapestWithinTolerance', () => {
  it('picks the cheapest of those within the tolerance of the best', () => {
    expect(cheapestWithinTolerance([0.8, 0.73, 0.7], [3, 2, 1], 0.05)).toBe(0);
    expect(cheapestWithinTolerance([0.8, 0.76, 0.7], [3, 2, 1], 0.05)).toBe(1);
    // 0.8 − 0.1 is 0.7000000000000001 in floating point; 0.7 is still within 0.1.
    expect(cheapestWithinTolerance([0.8, 0.73, 0.7], [3, 2, 1], 0.1)).toBe(2);
  });

  it('counts an unknown cost as dearer than any known one, and breaks cost ties by score then order', () => {
    expect(cheapestWithinTolerance([0.8, 0.79], [null, 5], 0.05)).toBe(1);
    expect(cheapestWithinTolerance([0.8, 0.79], [null, null], 0.05)).toBe(0);
    expect(cheapestWithinTolerance([0.78, 0.8], [1, 1], 0.05)).toBe(1);
    expect(cheapestWithinTolerance([0.8, 0.8], [1, 1], 0.05)).toBe(0);
  });
});

describe('cost estimate', () => {
  it('is chars / 4 of the message text (rounded up) plus max_completion_tokens, else the default', () => {
    const t = estimateTokens([{ role: 'system', content: 'x'.repeat(10) }, { role: 'user', content: [{ type: 'text', text: 'y'.repeat(7) }] }], 50, 256);
    expect(t).toEqual({ input: 5, output: 50 }); // ceil(17 / 4) = 5
    expect(estimateTokens([], undefined, 256)).toEqual({ input: 0, output: 256 });
    const cfg = makeConfig(yaml());
    expect(estimateCost(cfg.gateway.models.premium, { input: 1000, output: 100 })).toBeCloseTo((1000 * 10 + 100 * 30) / 1e6, 15);
    expect(estimateCost(cfg.gateway.models.nocost, { input: 1000, output: 100 })).toBeNull();
  });
});

describe('smart_cost', () => {
  it('selects the best when nothing cheaper is within the tolerance', () => {
    const d = setup({ tolerance: 0.05 }).route();
    expect(d.strategyId).toBe('smart_cost');
    expect(models(d)).toEqual(['premium', 'mid', 'cheap']);
    expect(d.candidates.map((c) => c.score)).toEqual([0.8, 0.73, 0.7].map((x) => expect.closeTo(x, 12)));
  });

  it('selects the cheapest within the tolerance; fallbacks within it by cost, then the rest by score', () => {
    expect(models(setup({ tolerance: 0.1 }).route())).toEqual(['cheap', 'mid', 'premium']);
    expect(models(setup({ tolerance: 0.08 }).route())).toEqual(['mid', 'premium', 'cheap']);
  });

  it('prefers a model with a known price to one without', () => {
    expect(models(setup({ tolerance: 0.05, targets: '[p/nocost, p/premium]' }).route())).toEqual(['premium', 'nocost']);
  });

  it('follows the learned scores, not only the priors', () => {
    const s = setup({ tolerance: 0.05 });
    s.stats.set({ orgId: 'acme', provider: 'p', model: 'cheap', n: 300, outcomeMean: 0.95, outcomeVar: 0.01 });
    expect(models(s.route())[0]).toBe('cheap');
  });

  it('reports router insight without phase or weights, never exploring, with evidence', () => {
    const d = setup({ tolerance: 0.1 }).route();
    expect(d.insight).toMatchObject({ routerInvoked: true, phase: null, weights: null, explorationRateEffective: 0, confidenceReason: 'cap_day0' });
    expect(d.insight.confidence).toBeLessThanOrEqual(0.5);
    expect(d.insight.evidence).toMatchObject({ samples: 0, top2ScoreGap: expect.closeTo(0.07, 12), recentRegressions: { kind: 'exact', exact: 0 } });
  });

  it('gives the share of posterior draws in which the same rule picks the same model as confidence, repeatably', () => {
    const s = setup({ tolerance: 0.05 });
    s.stats.set({ orgId: 'acme', provider: 'p', model: 'premium', n: 100, outcomeMean: 0.8, outcomeVar: 0.05 });
    s.stats.set({ orgId: 'acme', provider: 'p', model: 'mid', n: 100, outcomeMean: 0.76, outcomeVar: 0.05 });
    s.stats.set({ orgId: 'acme', provider: 'p', model: 'cheap', n: 100, outcomeMean: 0.5, outcomeVar: 0.05 });
    const d = s.route({ requestId: 'same' });
    expect(d.insight.confidenceReason).toBe('ok');
    expect(d.insight.confidence).toBeGreaterThan(0);
    expect(d.insight.confidence).toBeLessThan(1);
    expect(s.route({ requestId: 'same' }).insight).toEqual(d.insight);
  });
});

describe('constraint max_cost_increase', () => {
  // 400 characters → 100 input tokens; 100 output tokens. cheap = (100·1 + 100·2)/1e6 = 3e-4;
  // mid = 1.4 × cheap (kept under a 0.5 ratio, at exactly 0.4 too); premium = 4e-3 (13.3 × cheap).
  const input = { messages: [{ role: 'user' as const, content: 'x'.repeat(400) }], maxCompletionTokens: 100 };

  it.each(['ordered', 'weighted', 'smart_cost', 'feedback_driven'])('filters with %s, with the candidate\'s score', (strategy) => {
    const d = setup({ strategy, tolerance: 0.1, targets: '[p/cheap, p/mid, p/premium]', constraints: '{ max_cost_increase: 0.5 }' }).route(input);
    expect(d.filtered).toEqual([{ provider: 'p', model: 'premium', reason: 'constraint_max_cost_increase', score: strategy === 'smart_cost' || strategy === 'feedback_driven' ? expect.closeTo(0.8, 12) : 0 }]);
    expect(models(d).sort()).toEqual(['cheap', 'mid']);
  });

  it('keeps a candidate exactly at the ratio, and measures against the first target even when it is not the cheapest', () => {
    expect(setup({ strategy: 'ordered', targets: '[p/cheap, p/mid]', constraints: '{ max_cost_increase: 0.4 }' }).route(input).filtered).toEqual([]);
    const d = setup({ strategy: 'ordered', targets: '[p/mid, p/cheap, p/premium]', constraints: '{ max_cost_increase: 0 }' }).route(input);
    expect(models(d)).toEqual(['mid', 'cheap']);
    expect(d.filtered.map((f) => f.model)).toEqual(['premium']);
  });

  it('uses the estimated tokens: the default output tokens when the request gives none', () => {
    // With no max_completion_tokens, output = 256 default: costs scale but the ratios stay, so premium is still out.
    expect(setup({ strategy: 'ordered', targets: '[p/cheap, p/premium]', constraints: '{ max_cost_increase: 0.5 }' }).route().filtered).toHaveLength(1);
  });

  it('filters nothing when the first target or a candidate has no price', () => {
    expect(setup({ strategy: 'ordered', targets: '[p/nocost, p/premium]', constraints: '{ max_cost_increase: 0 }' }).route(input).filtered).toEqual([]);
    expect(setup({ strategy: 'ordered', targets: '[p/cheap, p/nocost]', constraints: '{ max_cost_increase: 0 }' }).route(input).filtered).toEqual([]);
  });
});
