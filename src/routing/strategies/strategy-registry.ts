import type { StrategyId } from '../../config/gateway-config.schema';
import { directStrategy, orderedStrategy, weightedStrategy } from './basic.strategies';
import type { RoutingStrategy } from './strategy';

/**
 * Strategies by config id. `smart_cost` and `feedback_driven` arrive with the learning-routing issue
 * (#7); until then a route naming them is refused at start-up (RoutingService) rather than silently
 * served by another strategy.
 */
export const STRATEGIES: Partial<Record<StrategyId, RoutingStrategy>> = {
  direct: directStrategy,
  ordered: orderedStrategy,
  weighted: weightedStrategy,
};
