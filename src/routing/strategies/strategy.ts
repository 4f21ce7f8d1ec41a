import type { RouteSpec, TargetRef } from '../../config/gateway-config';
import type { StrategyId } from '../../config/gateway-config.schema';
import type { Candidate, RoutingInput } from '../routing.types';

export interface StrategyContext {
  route?: RouteSpec;
  input: RoutingInput;
  random: () => number;
}

export interface StrategyResult {
  /** Candidates in dispatch order, with the strategy's scores. */
  ordered: Candidate[];
}

/**
 * A routing strategy (DESIGN §6 step 5): orders the candidates that survived filtering. `direct`,
 * `ordered` and `weighted` are here; `smart_cost` and `feedback_driven` implement the same interface.
 */
export interface RoutingStrategy {
  readonly id: StrategyId;
  /** Whether it is a "router" (explain reports `no_router_invoked` for those that are not). */
  readonly invokesRouter: boolean;
  select(candidates: readonly TargetRef[], ctx: StrategyContext): StrategyResult;
}
