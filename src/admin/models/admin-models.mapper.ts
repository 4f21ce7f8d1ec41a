import type { ModelStats } from '../../learning/model-stats';
import type { ExplainResponseJson } from '../../routing-explain/explain.mapper';
import { iso } from '../common/admin-store';

/** What the learning loop holds for one (organisation or pool, provider, model): a model_stats row. */
export interface ModelStatsJson {
  /** Sessions with feedback attributed to the pair in the learning window. */
  n: number;
  /** Requests of the pair in the window (failed fallback attempts included). */
  requests: number;
  outcome_mean: number;
  outcome_variance: number;
  /** Mean feedback score / 10, and its variance. */
  score_mean: number;
  score_variance: number;
  useful_rate: number;
  /** Feedback scores 0–6, 7–8 and 9–10. */
  nps: { detractors: number; passives: number; promoters: number };
  success_rate: number;
  latency_ms: { p50: number | null; p90: number | null; p99: number | null };
  cost_mean_usd: number | null;
  computed_at: string;
}

/** How one route that lists the pair decides now: explain's own figures for that route (a dry run). */
export interface RouteViewJson {
  route: string;
  strategy: string;
  /** The route's phase and confidence, as explain states them for a request to it; null when no router runs. */
  phase: ExplainResponseJson['phase'];
  confidence: number | null;
  confidence_reason: ExplainResponseJson['confidence_reason'];
  used_shared_pool_prior: boolean;
  /** The pair among the route's candidates: its score and 1-based rank, and whether routing would pick it first. */
  score: number | null;
  rank: number | null;
  would_select: boolean;
  /** Why the pair is left out now (`breaker_open`, `constraint_max_cost_increase`, …); null when it is a candidate. */
  filtered_reason: string | null;
}

export interface AdminModelJson {
  provider: string;
  model: string;
  type: 'chat' | 'embedding';
  /** The catalogue's priors and prices. */
  catalogue: { quality: number | null; manual_score: number | null; cost: { input_per_mtok: number; output_per_mtok: number } | null };
  /** The organisation's figures; null before it has any. */
  stats: ModelStatsJson | null;
  /** The cross-organisation pool's figures, the prior routing borrows below n_min; null before any. */
  pool: ModelStatsJson | null;
  /** Regressions of the organisation's pair within the window routing penalises (7 days). */
  regressions: { count: number; last_at: string | null };
  /** Every route of the organisation that lists the pair (chat models). */
  routes: RouteViewJson[];
}

export function toModelStatsJson(s: ModelStats | undefined): ModelStatsJson | null {
  if (!s) return null;
  return {
    n: s.n,
    requests: s.requests,
    outcome_mean: s.outcomeMean,
    outcome_variance: s.outcomeVar,
    score_mean: s.scoreMean,
    score_variance: s.scoreVar,
    useful_rate: s.usefulRate,
    nps: { detractors: s.npsDetractors, passives: s.npsPassives, promoters: s.npsPromoters },
    success_rate: s.successRate,
    latency_ms: { p50: s.latencyP50Ms, p90: s.latencyP90Ms, p99: s.latencyP99Ms },
    cost_mean_usd: s.costMeanUsd,
    computed_at: iso(s.computedAt) ?? '',
  };
}
