/** How long a regression counts: explain's evidence and the score penalty look back this far (docs/api.md "POST /v1/routing/explain"). */
export const REGRESSION_WINDOW_MS = 7 * 24 * 3600 * 1000;

/** Why a regression was recorded (docs/architecture.md "Regressions"); detail never carries prompt text. */
/**
 * `quality_drop`: the rolling mean below the long-run one (regression.detector.ts);
 * `experiment_rolled_back`: a rollback; `change_detected`: the change detector of the learning beat
 * found a drop (README "Drift: change detection").
 */
export const REGRESSION_REASONS = ['quality_drop', 'experiment_rolled_back', 'change_detected'] as const;
export type RegressionReason = (typeof REGRESSION_REASONS)[number];

/** One row of `regressions`, as routing needs it. */
export interface RegressionRecord {
  orgId: string;
  provider: string;
  model: string;
  reason: string;
  createdAt: Date;
}

/**
 * The in-memory view of recent regressions that routing reads synchronously (routing never queries
 * SQL per request). Implemented by RegressionsSnapshotService; fakes in tests.
 */
export abstract class RegressionsView {
  /** When regressions were recorded for (org, provider, model) in the 7 days up to `now`, newest first. */
  abstract recent(orgId: string, provider: string, model: string, now: Date): readonly Date[];
}
