import type { ArmSummary, StopVerdict } from '../../experiments/experiment-quality';
import { QUALITY_WEIGHTS } from '../../experiments/experiment-quality';
import type { StoredExperimentEvent } from './admin-experiments.repository';
import { toExperimentJson, type ExperimentJson } from '../../experiments/experiment.mapper';
import type { ExperimentRecord } from '../../experiments/experiment.record';

/** The contract's record plus what an operator needs and the contract does not return. */
export interface AdminExperimentJson extends ExperimentJson {
  stop_rule: { min_n: number; max_regression: number };
  created_at: string;
  created_by_key_id: string | null;
}

export interface ExperimentEventJson {
  id: string;
  kind: string;
  /** `api_key` (the key `actor_api_key_id`) or `system` (the stop rules, the shadow runner). */
  actor: 'api_key' | 'system';
  actor_api_key_id: string | null;
  detail: Record<string, unknown> | null;
  created_at: string;
}

/** One arm's live figures: the stop rule's own (experiment-quality.ts), and how far it is from `min_n`. */
export interface ArmFiguresJson extends ArmSummary {
  /** The parts of the composite quality and their weights (canary; a shadow's quality is its success rate alone). */
  quality_parts: { mean_score: number | null; useful_rate: number | null; success_rate: number | null; weights: typeof QUALITY_WEIGHTS | { success: 1 } };
  min_n: number;
  samples_to_min_n: number;
}

export interface StopRuleStateJson {
  formula: string;
  min_n: number;
  max_regression: number;
  /** What the stop rule would do now: wait (an arm below min_n, or a quality unknown), complete or roll back. */
  verdict: 'wait' | 'complete' | 'rollback';
  /** baseline quality − candidate quality; a roll-back needs it above max_regression. Null while a quality is unknown. */
  quality_gap: number | null;
  /** The verdict on the quality gap alone, as if both arms had min_n samples already; null while a quality is unknown. */
  verdict_at_min_n: 'complete' | 'rollback' | null;
}

export function toAdminExperimentJson(r: ExperimentRecord): AdminExperimentJson {
  return {
    ...toExperimentJson(r),
    stop_rule: { min_n: r.stopRule.minN, max_regression: r.stopRule.maxRegression },
    created_at: r.createdAt.toISOString(),
    created_by_key_id: r.createdByKeyId,
  };
}

export function toEventJson(e: StoredExperimentEvent): ExperimentEventJson {
  return {
    id: e.id,
    kind: e.kind,
    actor: e.actorApiKeyId === null ? 'system' : 'api_key',
    actor_api_key_id: e.actorApiKeyId,
    detail: e.detail,
    created_at: e.createdAt.toISOString(),
  };
}

export function toArmFiguresJson(r: ExperimentRecord, a: ArmSummary): ArmFiguresJson {
  return {
    ...a,
    quality_parts: {
      mean_score: r.type === 'canary' ? a.mean_score : null,
      useful_rate: r.type === 'canary' ? a.useful_rate : null,
      success_rate: a.error_rate === null ? null : 1 - a.error_rate,
      weights: r.type === 'canary' ? QUALITY_WEIGHTS : { success: 1 },
    },
    min_n: r.stopRule.minN,
    samples_to_min_n: Math.max(0, r.stopRule.minN - a.samples),
  };
}

/** `now`: the stop rule on the experiment as it is; `atMinN`: the same rule with `min_n` taken as met. */
export function toStopRuleStateJson(r: ExperimentRecord, formula: string, now: StopVerdict, atMinN: StopVerdict): StopRuleStateJson {
  return {
    formula,
    min_n: r.stopRule.minN,
    max_regression: r.stopRule.maxRegression,
    verdict: now.action,
    // The rule's own quality_delta (candidate − baseline), turned into the drop it compares with max_regression.
    quality_gap: atMinN.action === 'wait' ? null : -atMinN.summary.quality_delta,
    verdict_at_min_n: atMinN.action === 'wait' ? null : atMinN.action,
  };
}
