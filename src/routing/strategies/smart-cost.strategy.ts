import { ownValue } from '../../common/own-key';
import type { ModelSpec, TargetRef } from '../../config/gateway-config';
import { estimateCost } from './cost';
import { asCandidate, byScore, drawWinners, LearnedScorer, RouterParams } from './learned-score';
import { LearnedStrategy } from './learned.strategy';
import type { StrategyContext, StrategyResult } from './strategy';

/**
 * The smart_cost rule over a set of scores: among the candidates whose score is within `tolerance`
 * of the best (score ≥ best − tolerance), the cheapest by estimated cost; an unknown cost counts as
 * dearer than any known one; ties go to the higher score, then to the route's order.
 */
export function cheapestWithinTolerance(scores: ArrayLike<number>, costs: readonly (number | null)[], tolerance: number): number {
  let best = -Infinity;
  for (let i = 0; i < scores.length; i++) best = Math.max(best, scores[i]);
  // A hair of slack: 0.8 − 0.1 is 0.7000000000000001 in floating point, and 0.7 is within 0.1 of 0.8.
  const floor = best - tolerance - 1e-12;
  let pick = -1;
  for (let i = 0; i < scores.length; i++) {
    if (scores[i] < floor) continue;
    if (pick < 0) {
      pick = i;
      continue;
    }
    const ci = costs[i] ?? Infinity;
    const cp = costs[pick] ?? Infinity;
    if (ci < cp || (ci === cp && scores[i] > scores[pick])) pick = i;
  }
  return pick;
}

/**
 * `smart_cost`: the cheapest candidate whose learned score (the same posterior as
 * feedback_driven) is within `routing.smart_cost.tolerance` of the best. Deterministic in both modes:
 * it does not explore (exploration_rate_effective 0). Fallback order: the other candidates within
 * tolerance by cost, then the rest by score. Confidence = the share of K posterior draws (seeded by
 * the request id) in which the same rule, applied to the drawn scores, picks the same candidate;
 * capped like feedback_driven's. phase and weights are feedback_driven's only (contract): null here.
 */
export class SmartCostStrategy extends LearnedStrategy {
  readonly id = 'smart_cost' as const;

  constructor(
    scorer: LearnedScorer,
    params: RouterParams,
    private readonly models: Readonly<Record<string, ModelSpec>>,
  ) {
    super(scorer, params);
  }

  select(candidates: readonly TargetRef[], ctx: StrategyContext): StrategyResult {
    const a = this.assessAll(candidates, ctx);
    if (a.length === 0) return { ordered: [] };
    const costs = a.map((x) => estimateCost(ownValue(this.models, x.model), ctx.tokens));
    const tolerance = this.params.smart_cost.tolerance;
    const scores = a.map((x) => x.score);
    const pick = cheapestWithinTolerance(scores, costs, tolerance);
    const floor = Math.max(...scores) - tolerance - 1e-12;
    const eligible = a
      .map((_, i) => i)
      .filter((i) => i !== pick && scores[i] >= floor)
      .sort((i, j) => (costs[i] ?? Infinity) - (costs[j] ?? Infinity) || scores[j] - scores[i] || i - j);
    const rest = byScore(a).filter((i) => i !== pick && !eligible.includes(i));
    const order = [pick, ...eligible, ...rest];
    const selected = a[pick];

    return {
      ordered: order.map((i) => asCandidate(a[i])),
      insight: this.insight(ctx, a, selected, { phase: null, weights: null }, (k, random) => {
        const wins = drawWinners(a, k, random, (theta) => cheapestWithinTolerance(theta, costs, tolerance));
        return { raw: wins[pick] / k, explorationRateEffective: 0 };
      }),
    };
  }
}
