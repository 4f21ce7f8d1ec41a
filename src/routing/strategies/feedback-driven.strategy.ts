import type { TargetRef } from '../../config/gateway-config';
import type { Candidate } from '../routing.types';
import { argmax, Assessment, byScore, capConfidence, drawWinners, evidenceOf, LearnedScorer, RouterParams } from './learned-score';
import { mulberry32, NormalSampler, seedOf } from './random';
import { RoutingStrategy, StrategyContext, StrategyResult, withLazyDraws } from './strategy';

const scored = (a: Assessment): Candidate => ({ provider: a.provider, model: a.model, score: a.score });

/**
 * `feedback_driven` (DESIGN §6): candidates scored by LearnedScorer's posterior; the order is
 *
 *   live      Thompson sampling: one posterior draw per candidate from `ctx.random`, highest first
 *             (the draws also order the fallbacks). Exploration needs no knob: it shrinks as the
 *             posteriors narrow (variance σ²/(n0 + n)) and is measured, as exploration_rate_effective.
 *   dry-run   the posterior means (scores), highest first: deterministic.
 *
 * Insight, in both modes, from K = routing.confidence_draws joint posterior draws seeded by the
 * request id (the same request explains the same way):
 *   confidence                 share of draws in which the selected candidate is the best, capped by
 *                              capConfidence (single_candidate, cap_day0, cap_shared, insufficient_samples);
 *   exploration_rate_effective share of draws whose best is not the posterior-mean winner: the rate
 *                              at which live traffic leaves the current favourite;
 *   phase, weights             the selected candidate's (each candidate is scored with its own phase);
 *   evidence                   evidenceOf (selected n, top-2 score gap, outcome variance, regressions).
 */
export class FeedbackDrivenStrategy implements RoutingStrategy {
  readonly id = 'feedback_driven' as const;
  readonly invokesRouter = true;

  constructor(
    private readonly scorer: LearnedScorer,
    private readonly params: RouterParams,
  ) {}

  scoreOf(candidate: TargetRef, ctx: StrategyContext): number {
    return this.scorer.assess(candidate, ctx.input.caller.orgId, ctx.now).score;
  }

  select(candidates: readonly TargetRef[], ctx: StrategyContext): StrategyResult {
    const orgId = ctx.input.caller.orgId;
    const a = candidates.map((t) => this.scorer.assess(t, orgId, ctx.now));
    if (a.length === 0) return { ordered: [] };
    const byMean = byScore(a);
    let order: number[];
    if (ctx.input.mode === 'live') {
      const sampler = new NormalSampler(ctx.random);
      const theta = a.map((x) => x.score + Math.sqrt(x.variance) * sampler.next());
      order = a.map((_, i) => i).sort((i, j) => theta[j] - theta[i] || i - j);
    } else order = byMean;
    const selected = a[order[0]];

    return {
      ordered: order.map((i) => scored(a[i])),
      insight: withLazyDraws(
        {
          routerInvoked: true,
          phase: selected.phase,
          weights: selected.weights,
          usedSharedPoolPrior: selected.priorSource === 'pool',
          evidence: evidenceOf(selected, a),
        },
        () => {
          let raw = 1;
          let exploration = 0;
          if (a.length > 1) {
            const wins = drawWinners(a, this.params.confidence_draws, mulberry32(seedOf(ctx.input.requestId)), argmax);
            raw = wins[order[0]] / this.params.confidence_draws;
            exploration = 1 - wins[byMean[0]] / this.params.confidence_draws;
          }
          const { confidence, reason } = capConfidence(raw, a.length, this.scorer.orgSamples(orgId), selected, this.params.n_min, this.params.confidence_caps);
          return { confidence, confidenceReason: reason, explorationRateEffective: exploration };
        },
      ),
    };
  }
}
