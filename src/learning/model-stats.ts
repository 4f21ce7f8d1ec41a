/** The `orgId` of the cross-organisation pool; never a real organisation (their ids start with a letter or digit). */
export const POOL_ORG = '*';

/**
 * Rolling aggregates per (organisation, provider, model) that routing reads (docs/architecture.md
 * "The learning loop"). Computed by the aggregation job from feedback joined to decision traces,
 * through the rollups (exact sums per hour bucket, docs/architecture.md "Statistics are derived,
 * never accumulated"); the window starts on a whole hour. `orgId` '*' is the cross-organisation pool.
 */
export interface ModelStats {
  orgId: string;
  provider: string;
  model: string;
  /**
   * Sessions with feedback attributed to this model in the window: a session counts once for every
   * (provider, model) that answered one of its chat requests successfully (README "Feedback and the learning loop").
   */
  n: number;
  /**
   * Outcome y = w_s·(score/10) + w_u·useful in [0, 1] per session (weights from config
   * `learning.weights`, default 0.6 / 0.4): mean and population variance. With n = 0 the outcome,
   * score and useful figures are 0 and carry no information.
   */
  outcomeMean: number;
  outcomeVar: number;
  /** Feedback score / 10: mean and population variance. */
  scoreMean: number;
  scoreVar: number;
  /** Share of sessions marked useful, and its variance (rate·(1 − rate)). */
  usefulRate: number;
  usefulVar: number;
  /**
   * Share of requests that succeeded (status 2xx), over all requests of the model in the window: the
   * traces naming it and its failed attempts (a call that failed before another target served, or
   * one of a request no target served), which count as failures.
   */
  successRate: number;
  /** Requests of the model in the window (every endpoint, every status): traces naming it plus its failed attempts. */
  requests: number;
  /**
   * Latency percentiles (percentile_cont's interpolation, each order statistic read from a log-spaced
   * histogram: within 1 %) and mean cost over the successful requests; null when there were none (or
   * no cost known).
   */
  latencyP50Ms: number | null;
  latencyP90Ms: number | null;
  latencyP99Ms: number | null;
  costMeanUsd: number | null;
  npsDetractors: number;
  npsPassives: number;
  npsPromoters: number;
  computedAt: Date;
  /**
   * The latest change point the change detector found for the pair (README "Drift: change
   * detection"): its window starts there. Null or absent when none was found.
   */
  change?: { since: Date; direction: 'drop' | 'rise'; detectedAt: Date } | null;
  /**
   * When the pair last served a request the detector took in, and how many of the organisation's
   * requests it took in after that one: how long routing has starved the pair. Null or absent when unknown.
   */
  served?: { lastAt: Date; requestsSince: number } | null;
  /** The outcome test's rise statistic over its alarm threshold, ≥ 0: how far a rise is on its way to being detected. */
  riseEvidence?: number;
  /** The outcome test is held (a re-try of a starved pair, cusum.ts): its answers are being tested against what it was. */
  riseTesting?: boolean;
}

/**
 * The in-memory snapshot of the aggregates, refreshed on the aggregation job's beat. Routing and
 * explain read it synchronously; it never touches a store on the request path.
 */
export abstract class StatsSnapshot {
  /** Stats of one organisation for (provider, model), or undefined when it has none. */
  abstract get(orgId: string, provider: string, model: string): ModelStats | undefined;
  /** Cross-organisation pool for (provider, model). */
  abstract pool(provider: string, model: string): ModelStats | undefined;
  /** Total samples the organisation has across all models (0 = day zero). */
  abstract orgSamples(orgId: string): number;
  /** When the snapshot was last refreshed. */
  abstract readonly refreshedAt: Date | null;
}
