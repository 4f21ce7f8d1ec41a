import type { TargetRef } from '../../config/gateway-config';
import type { StrategyId } from '../../config/gateway-config.schema';
import type { RoutingInsight } from '../routing.types';
import { Assessment, capConfidence, evidenceOf, LearnedScorer, RetryReason, RouterParams } from './learned-score';
import { mulberry32, seedOf } from './random';
import { RouterInsight, RoutingStrategy, StrategyContext, StrategyResult, withLazyDraws } from './strategy';

/** What a learning strategy reads off its K confidence draws. */
export interface DrawShares {
  /** Share of the draws in which the selected candidate wins, before capConfidence. */
  raw: number;
  explorationRateEffective: number;
}

/**
 * What feedback_driven and smart_cost share (docs/architecture.md "One model of uncertainty"): the one
 * scorer and the routing params, a candidate's score (also for explain's filtered candidates), and the insight.
 */
export abstract class LearnedStrategy implements RoutingStrategy {
  abstract readonly id: StrategyId;
  readonly invokesRouter = true;

  constructor(
    protected readonly scorer: LearnedScorer,
    protected readonly params: RouterParams,
  ) {}

  abstract select(candidates: readonly TargetRef[], ctx: StrategyContext): StrategyResult;

  scoreOf(candidate: TargetRef, ctx: StrategyContext): number {
    return this.scorer.assess(candidate, ctx.input.caller.orgId, ctx.now).score;
  }

  /** The candidates' assessments, in the route's order. */
  protected assessAll(candidates: readonly TargetRef[], ctx: StrategyContext): Assessment[] {
    return candidates.map((t) => this.scorer.assess(t, ctx.input.caller.orgId, ctx.now));
  }

  /**
   * The insight: evidence now; confidence (capped by capConfidence) and exploration only when read,
   * from K = routing.confidence_draws draws seeded by the request id (the same request explains the
   * same way). `shares` is given K and that seeded source; with a single candidate it is not called
   * (confidence 1, exploration 0). `shown` is the selected candidate's phase and weights for
   * feedback_driven, null for smart_cost (contract). `retry`: the pick is a re-try (retryPick).
   */
  protected insight(
    ctx: StrategyContext,
    all: readonly Assessment[],
    selected: Assessment,
    shown: Pick<RoutingInsight, 'phase' | 'weights'>,
    shares: (k: number, random: () => number) => DrawShares,
    retry?: RetryReason,
  ): RouterInsight {
    const { confidence_draws: k, n_min: nMin, confidence_caps: caps } = this.params;
    return withLazyDraws(
      { routerInvoked: true, ...shown, usedSharedPoolPrior: selected.priorSource === 'pool', evidence: evidenceOf(selected, all, retry) },
      () => {
        const drawn = all.length > 1 ? shares(k, mulberry32(seedOf(ctx.input.requestId))) : { raw: 1, explorationRateEffective: 0 };
        const orgSamples = this.scorer.orgSamples(ctx.input.caller.orgId);
        const { confidence, reason } = capConfidence(drawn.raw, all.length, orgSamples, selected, nMin, caps);
        return { confidence, confidenceReason: reason, explorationRateEffective: drawn.explorationRateEffective };
      },
    );
  }
}
