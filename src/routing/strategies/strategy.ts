import type { RouteSpec, TargetRef } from '../../config/gateway-config';
import type { StrategyId } from '../../config/gateway-config.schema';
import type { Candidate, RoutingInput, RoutingInsight } from '../routing.types';
import type { TokenEstimate } from './cost';

export interface StrategyContext {
  route?: RouteSpec;
  input: RoutingInput;
  /** The live random source (weighted draws, Thompson sampling): `input.random`, else Math.random. */
  random: () => number;
  /** One clock reading per routing decision (regression windows). */
  now: Date;
  /** The request's estimated tokens (cost-aware strategies and constraints). */
  tokens: TokenEstimate;
}

/** What a router adds to the decision (explain's phase, weights, confidence, evidence). */
export type RouterInsight = Omit<RoutingInsight, 'firewallBlocked'>;

type DrawnFields = Pick<RoutingInsight, 'confidence' | 'confidenceReason' | 'explorationRateEffective'>;

/**
 * A router's insight whose confidence fields come from K posterior draws computed only when first
 * read: explain reads them, the live chat path never does, so live requests skip the draws.
 */
export function withLazyDraws(base: Omit<RouterInsight, keyof DrawnFields>, draw: () => DrawnFields): RouterInsight {
  let drawn: DrawnFields | undefined;
  const get = () => (drawn ??= draw());
  const insight = { ...base } as RouterInsight;
  for (const k of ['confidence', 'confidenceReason', 'explorationRateEffective'] as const) {
    Object.defineProperty(insight, k, { enumerable: true, get: () => get()[k] });
  }
  return insight;
}

export interface StrategyResult {
  /** Candidates in dispatch order, with the strategy's scores. */
  ordered: Candidate[];
  /** Routers (smart_cost, feedback_driven) say what they knew and how sure they are; others leave it out. */
  insight?: RouterInsight;
}

/**
 * A routing strategy (docs/architecture.md "The routing chain", step 5): orders the candidates that survived filtering.
 */
export interface RoutingStrategy {
  readonly id: StrategyId;
  /** Whether it is a "router" (explain reports `no_router_invoked` for those that are not). */
  readonly invokesRouter: boolean;
  select(candidates: readonly TargetRef[], ctx: StrategyContext): StrategyResult;
  /**
   * The score a candidate removed by a constraint would have had (explain's `filtered[].score`);
   * strategies that do not score leave it out, and 0 is reported.
   */
  scoreOf?(candidate: TargetRef, ctx: StrategyContext): number;
}
