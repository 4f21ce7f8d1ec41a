import type { ModelSpec } from '../../config/gateway-config';
import type { StrategyId } from '../../config/gateway-config.schema';
import { directStrategy, orderedStrategy, weightedStrategy } from './basic.strategies';
import { FeedbackDrivenStrategy } from './feedback-driven.strategy';
import { LearnedScorer, RouterParams } from './learned-score';
import { SmartCostStrategy } from './smart-cost.strategy';
import type { RoutingStrategy } from './strategy';

/** Strategies by config id; the learning ones share one scorer (docs/architecture.md "One model of uncertainty"). */
export function createStrategies(
  scorer: LearnedScorer,
  params: RouterParams,
  models: Readonly<Record<string, ModelSpec>>,
): Record<StrategyId, RoutingStrategy> {
  return {
    direct: directStrategy,
    ordered: orderedStrategy,
    weighted: weightedStrategy,
    smart_cost: new SmartCostStrategy(scorer, params, models),
    feedback_driven: new FeedbackDrivenStrategy(scorer, params),
  } satisfies Record<StrategyId, RoutingStrategy>;
}
