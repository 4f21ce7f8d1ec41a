import type { ArmStats, ExperimentStats } from './experiment-stats.repository';
import type { ExperimentArm, ExperimentRecord } from './experiment.record';

/**
 * Composite quality of an arm (docs/architecture.md "Stop rules", README "Traffic and stop rules"), in [0, 1]:
 *
 *   canary  q = 0.5·mean(score/10) + 0.3·useful_rate + 0.2·(1 − error_rate)
 *           samples = sessions with feedback that the arm's own target served
 *   shadow  q = 1 − error_rate
 *           samples = requests (a shadow's candidate answers are never shown, so there is no
 *           feedback on them: both arms are compared on the term they both have)
 *
 * error_rate = failed / requests of the arm: 5xx, or fallen back away from the arm's target, over
 * those plus the successes (4xx are the client's doing and count neither way). Once both arms have at
 * least `min_n` samples: q_baseline − q_candidate > max_regression → rolled back, else completed.
 */
export const QUALITY_WEIGHTS = { score: 0.5, useful: 0.3, success: 0.2 } as const;

export const QUALITY_FORMULA = {
  canary: 'q = 0.5*mean(score/10) + 0.3*useful_rate + 0.2*(1 - error_rate); samples = sessions with feedback',
  shadow: 'q = 1 - error_rate; samples = requests',
} as const;

/** One arm in an ended experiment's `summary`. */
export interface ArmSummary {
  provider: string;
  model: string;
  samples: number;
  requests: number;
  quality: number | null;
  /** Mean feedback score on its 0–10 scale. */
  mean_score: number | null;
  useful_rate: number | null;
  error_rate: number | null;
  p50_latency_ms: number | null;
  mean_cost_usd: number | null;
}

export interface StopRuleSummary {
  [key: string]: unknown;
  formula: string;
  min_n: number;
  max_regression: number;
  /** q_candidate − q_baseline. */
  quality_delta: number;
  baseline: ArmSummary;
  candidate: ArmSummary;
}

export type StopVerdict =
  | { action: 'wait'; samples: Record<ExperimentArm, number> }
  | { action: 'complete' | 'rollback'; summary: StopRuleSummary };

/* A drop equal to the ceiling is within it; only float noise is tolerated beyond. */
const EPSILON = 1e-9;

function errorRate(s: ArmStats): number | null {
  return s.requests > 0 ? s.errors / s.requests : null;
}

function samplesOf(type: ExperimentRecord['type'], s: ArmStats): number {
  return type === 'canary' ? s.feedbackSessions : s.requests;
}

function qualityOf(type: ExperimentRecord['type'], s: ArmStats): number | null {
  const success = 1 - (errorRate(s) ?? 0);
  if (type === 'shadow') return s.requests > 0 ? success : null;
  if (s.scoreMean === null || s.usefulRate === null) return null;
  return QUALITY_WEIGHTS.score * s.scoreMean + QUALITY_WEIGHTS.useful * s.usefulRate + QUALITY_WEIGHTS.success * success;
}

/** One arm's figures as the stop rule sees them (also the Admin API's live figures of a running experiment). */
export function summaryOf(e: ExperimentRecord, arm: ExperimentArm, s: ArmStats): ArmSummary {
  const target = arm === 'baseline' ? e.baseline : e.candidate;
  return {
    provider: target.provider,
    model: target.model,
    samples: samplesOf(e.type, s),
    requests: s.requests,
    quality: qualityOf(e.type, s),
    mean_score: s.scoreMean === null ? null : s.scoreMean * 10,
    useful_rate: s.usefulRate,
    error_rate: errorRate(s),
    p50_latency_ms: s.latencyP50Ms,
    mean_cost_usd: s.costMeanUsd,
  };
}

/** The stop rule for one active experiment (docs/api.md "Decisions the contract leaves open", stop rule). Pure. */
export function evaluateStopRule(e: ExperimentRecord, stats: ExperimentStats): StopVerdict {
  const baseline = summaryOf(e, 'baseline', stats.baseline);
  const candidate = summaryOf(e, 'candidate', stats.candidate);
  const { minN, maxRegression } = e.stopRule;
  if (baseline.samples < minN || candidate.samples < minN || baseline.quality === null || candidate.quality === null) {
    return { action: 'wait', samples: { baseline: baseline.samples, candidate: candidate.samples } };
  }
  const summary: StopRuleSummary = {
    formula: QUALITY_FORMULA[e.type],
    min_n: minN,
    max_regression: maxRegression,
    quality_delta: candidate.quality - baseline.quality,
    baseline,
    candidate,
  };
  return { action: baseline.quality - candidate.quality > maxRegression + EPSILON ? 'rollback' : 'complete', summary };
}
