import type { TargetRef } from '../../config/gateway-config';
import type { RoutingStrategy, StrategyContext, StrategyResult } from './strategy';

const unscored = (targets: readonly TargetRef[]) => targets.map((t) => ({ ...t, score: null }));

/** The implicit rule of a bare catalogue id: its providers in configured order; no router invoked. */
export const directStrategy: RoutingStrategy = {
  id: 'direct',
  invokesRouter: false,
  select: (candidates): StrategyResult => ({ ordered: unscored(candidates) }),
};

/** Targets in the route's order: the first is primary, the rest are fallbacks. */
export const orderedStrategy: RoutingStrategy = {
  id: 'ordered',
  invokesRouter: false,
  select: (candidates): StrategyResult => ({ ordered: unscored(candidates) }),
};

/**
 * One target drawn with probability proportional to its weight (route `weights`, default equal),
 * the others follow in route order as fallbacks. Score = the target's share of the weight.
 */
export const weightedStrategy: RoutingStrategy = {
  id: 'weighted',
  invokesRouter: false,
  select(candidates, ctx: StrategyContext): StrategyResult {
    const route = ctx.route;
    const weightOf = (t: TargetRef) => {
      const i = route ? route.targets.findIndex((r) => r.provider === t.provider && r.model === t.model) : -1;
      return i >= 0 && route?.weights ? route.weights[i] : 1;
    };
    const weights = candidates.map(weightOf);
    const total = weights.reduce((a, b) => a + b, 0);
    if (candidates.length === 0 || total <= 0) return { ordered: unscored(candidates) };
    let r = ctx.random() * total;
    let pick = candidates.length - 1;
    for (let i = 0; i < candidates.length; i++) {
      r -= weights[i];
      if (r < 0) {
        pick = i;
        break;
      }
    }
    const scored = candidates.map((t, i) => ({ ...t, score: weights[i] / total }));
    return { ordered: [scored[pick], ...scored.filter((_, i) => i !== pick)] };
  },
};
