import type { TargetRef } from '../../config/gateway-config';
import { argmax, asCandidate, byScore, drawWinnersUnder, explorationScale, retryPick } from './learned-score';
import { LearnedStrategy } from './learned.strategy';
import { mulberry32, NormalSampler, seedOf } from './random';
import type { StrategyContext, StrategyResult } from './strategy';

/**
 * `feedback_driven` (docs/architecture.md "One model of uncertainty"): candidates scored by LearnedScorer's posterior; the order is
 *
 *   live      Thompson sampling with a decaying exploration rate: one draw per candidate from `ctx.random`,
 *             highest first (the draws also order the fallbacks). Candidate i draws from its posterior
 *             with the standard deviation scaled by s_i = explorationScale(n_i) = max(floor,
 *             1/√(1 + n_i/decay_samples)) (routing.exploration): plain Thompson sampling while a
 *             candidate's own evidence is thin, narrower draws (≈ 1/n instead of 1/√n) once it is not,
 *             so a runner-up close to the favourite stops being re-tried after tens of samples instead
 *             of hundreds. The decay follows each candidate's own n, so a starved candidate keeps its
 *             spread and can still win back traffic; the floor bounds the decay.
 *   dry-run   the posterior means (scores), highest first: deterministic.
 *   re-try    in both modes, for a share of the requests drawn from the request id, a starved or
 *             rising candidate is put first (retryPick, routing.retry_starved); the insight says so.
 *
 * Insight, in both modes, from K = routing.confidence_draws joint draws seeded by the request id (the
 * same request explains the same way); each draw's standard normals are read twice, with the
 * posterior's spreads and with the live (scaled) ones:
 *   confidence                 share of the posterior draws in which the selected candidate is the
 *                              best (the probability it truly is; the decay does not change it),
 *                              capped by capConfidence (single_candidate, cap_day0, cap_shared,
 *                              insufficient_samples);
 *   exploration_rate_effective share of the live draws whose best is not the posterior-mean winner:
 *                              the rate at which live traffic actually leaves the current favourite;
 *   phase, weights             the selected candidate's (each candidate is scored with its own phase);
 *   evidence                   evidenceOf (selected n, top-2 score gap, outcome variance, regressions).
 */
export class FeedbackDrivenStrategy extends LearnedStrategy {
  readonly id = 'feedback_driven' as const;

  select(candidates: readonly TargetRef[], ctx: StrategyContext): StrategyResult {
    const a = this.assessAll(candidates, ctx);
    if (a.length === 0) return { ordered: [] };
    const byMean = byScore(a);
    // Live draws: the posterior with each spread scaled by explorationScale(n) (routing.exploration).
    const scale = a.map((x) => explorationScale(x.n, this.params.exploration));
    let order: number[];
    if (ctx.input.mode === 'live') {
      const sampler = new NormalSampler(ctx.random);
      const theta = a.map((x, i) => x.score + scale[i] * Math.sqrt(x.variance) * sampler.next());
      order = a.map((_, i) => i).sort((i, j) => theta[j] - theta[i] || i - j);
    } else order = byMean;
    // A starved (or rising) candidate re-tried for a bounded share of the requests, in both modes, so
    // explain shows what chat would do with the same request id (retryPick).
    const retry = retryPick(a, order[0], mulberry32(seedOf(`${ctx.input.requestId}\u0000retry`))(), ctx.now, this.params.retry_starved, this.params.exploration);
    if (retry) order = [retry.index, ...order.filter((i) => i !== retry.index)];
    const selected = a[order[0]];

    return {
      ordered: order.map((i) => asCandidate(a[i])),
      insight: this.insight(
        ctx,
        a,
        selected,
        { phase: selected.phase, weights: selected.weights },
        (k, random) => {
          const [posterior, live] = drawWinnersUnder(a, k, random, argmax, [a.map(() => 1), scale]);
          return { raw: posterior[order[0]] / k, explorationRateEffective: 1 - live[byMean[0]] / k };
        },
        retry?.reason,
      ),
    };
  }
}
