import type { RoutingInsight } from '../routing.types';
import { Assessment, capConfidence, evidenceOf, LearnedScorer, RouterParams } from './learned-score';
import { mulberry32, seedOf } from './random';
import { RouterInsight, StrategyContext, withLazyDraws } from './strategy';

/** What a learning strategy reads off its K confidence draws. */
export interface DrawShares {
  /** Share of the draws in which the selected candidate wins, before capConfidence. */
  raw: number;
  explorationRateEffective: number;
}

export interface LearnedDecision {
  scorer: LearnedScorer;
  params: RouterParams;
  ctx: StrategyContext;
  all: readonly Assessment[];
  selected: Assessment;
  /** The selected candidate's phase and weights for feedback_driven; null for smart_cost (contract). */
  phase: RoutingInsight['phase'];
  weights: RoutingInsight['weights'];
}

/**
 * The insight of feedback_driven and smart_cost: evidence now; confidence (capped by capConfidence)
 * and exploration only when read, from K = routing.confidence_draws draws seeded by the request id
 * (the same request explains the same way). `shares` is given K and that seeded source; with a single
 * candidate it is not called (confidence 1, exploration 0).
 */
export function learnedInsight(d: LearnedDecision, shares: (k: number, random: () => number) => DrawShares): RouterInsight {
  const { params, all, selected } = d;
  return withLazyDraws(
    {
      routerInvoked: true,
      phase: d.phase,
      weights: d.weights,
      usedSharedPoolPrior: selected.priorSource === 'pool',
      evidence: evidenceOf(selected, all),
    },
    () => {
      const drawn = all.length > 1 ? shares(params.confidence_draws, mulberry32(seedOf(d.ctx.input.requestId))) : { raw: 1, explorationRateEffective: 0 };
      const orgSamples = d.scorer.orgSamples(d.ctx.input.caller.orgId);
      const { confidence, reason } = capConfidence(drawn.raw, all.length, orgSamples, selected, params.n_min, params.confidence_caps);
      return { confidence, confidenceReason: reason, explorationRateEffective: drawn.explorationRateEffective };
    },
  );
}
