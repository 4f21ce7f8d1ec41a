import type { TargetRef } from '../config/gateway-config';

export const EXPERIMENT_TYPES = ['canary', 'shadow'] as const;
export type ExperimentType = (typeof EXPERIMENT_TYPES)[number];
export type ExperimentStatus = 'draft' | 'active' | 'completed' | 'rolled_back';
/** The two sides of an experiment; a request of a canary belongs to one, a shadow's requests to the baseline (their copies to the candidate). */
export type ExperimentArm = 'baseline' | 'candidate';
export type ExperimentEventKind = 'created' | 'started' | 'rolled_back' | 'completed' | 'error';

/** Stop-rule inputs (defaults: min_n 100, max_regression 0.05). Stored, never returned by the API. */
export interface StopRule {
  minN: number;
  maxRegression: number;
}

export const DEFAULT_STOP_RULE: StopRule = { minN: 100, maxRegression: 0.05 };

/** One row of `experiments`, as the service sees it. */
export interface ExperimentRecord {
  id: string;
  orgId: string;
  type: ExperimentType;
  status: ExperimentStatus;
  trafficPct: number;
  baseline: TargetRef;
  candidate: TargetRef;
  stopRule: StopRule;
  summary: Record<string, unknown> | null;
  startedAt: Date | null;
  endedAt: Date | null;
  createdAt: Date;
  createdByKeyId: string | null;
}

/** What a create stores; the row is born `active` with `started_at` = now. */
export interface NewExperiment {
  orgId: string;
  type: ExperimentType;
  trafficPct: number;
  baseline: TargetRef;
  candidate: TargetRef;
  stopRule: StopRule;
  createdByKeyId: string;
}

/** One lifecycle event (docs/api.md "GET /v1/experiments"); `actorApiKeyId` is null for the system's own moves. */
export interface ExperimentEvent {
  experimentId: string;
  orgId: string;
  kind: ExperimentEventKind;
  actorApiKeyId: string | null;
  detail: Record<string, unknown> | null;
}
