/**
 * Rolling aggregates per (organisation, provider, model) that routing reads (DESIGN §6 "Learning
 * loop"). Computed by the aggregation job from feedback joined to decision traces; never
 * hand-accumulated. `orgId` '*' is the cross-organisation pool.
 */
export interface ModelStats {
  orgId: string;
  provider: string;
  model: string;
  /** Sessions with feedback attributed to this model in the window. */
  n: number;
  /** Outcome y in [0, 1] per session (DESIGN §6): mean and variance. */
  outcomeMean: number;
  outcomeVar: number;
  /** Feedback score / 10: mean and variance. */
  scoreMean: number;
  scoreVar: number;
  /** Share of sessions marked useful, and its variance. */
  usefulRate: number;
  usefulVar: number;
  /** Share of requests (traces) that succeeded, over all traces of the model in the window. */
  successRate: number;
  requests: number;
  latencyP50Ms: number | null;
  latencyP90Ms: number | null;
  latencyP99Ms: number | null;
  costMeanUsd: number | null;
  npsDetractors: number;
  npsPassives: number;
  npsPromoters: number;
  computedAt: Date;
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
