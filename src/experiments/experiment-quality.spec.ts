import { makeExperiment } from '../../test/support/kit';
import { evaluateStopRule, QUALITY_WEIGHTS } from './experiment-quality';
import type { ArmStats } from './experiment-stats.repository';

function arm(overrides: Partial<ArmStats> = {}): ArmStats {
  return { feedbackSessions: 4, scoreMean: 0.8, usefulRate: 0.75, requests: 5, errors: 1, latencyP50Ms: 120, costMeanUsd: 0.002, ...overrides };
}

describe('evaluateStopRule', () => {
  it('the weights sum to 1, so quality stays in [0, 1]', () => {
    expect(QUALITY_WEIGHTS.score + QUALITY_WEIGHTS.useful + QUALITY_WEIGHTS.success).toBeCloseTo(1, 12);
  });

  it('canary: waits until both arms have min_n feedback sessions', () => {
    const e = makeExperiment();
    expect(evaluateStopRule(e, { baseline: arm(), candidate: arm({ feedbackSessions: 3 }) })).toEqual({ action: 'wait', samples: { baseline: 4, candidate: 3 } });
    expect(evaluateStopRule(e, { baseline: arm({ feedbackSessions: 0, scoreMean: null, usefulRate: null }), candidate: arm() }).action).toBe('wait');
    // Many requests are not samples: only sessions with feedback are.
    expect(evaluateStopRule(e, { baseline: arm({ requests: 1_000 }), candidate: arm({ feedbackSessions: 1, requests: 1_000 }) }).action).toBe('wait');
  });

  it('canary: q = 0.5·score/10 + 0.3·useful + 0.2·(1 − error_rate), the summary filled per arm', () => {
    const e = makeExperiment();
    const v = evaluateStopRule(e, {
      baseline: arm(),
      candidate: arm({ feedbackSessions: 5, scoreMean: 0.7, usefulRate: 0.6, requests: 8, errors: 0, latencyP50Ms: 90, costMeanUsd: null }),
    });
    // baseline 0.5·0.8 + 0.3·0.75 + 0.2·0.8 = 0.785; candidate 0.5·0.7 + 0.3·0.6 + 0.2·1 = 0.73; drop 0.055 > 0.05.
    expect(v.action).toBe('rollback');
    if (v.action === 'wait') throw new Error('unreachable');
    expect(v.summary.baseline).toEqual({
      provider: 'mock', model: 'base', samples: 4, requests: 5, quality: expect.closeTo(0.785, 12), mean_score: expect.closeTo(8, 12),
      useful_rate: 0.75, error_rate: 0.2, p50_latency_ms: 120, mean_cost_usd: 0.002,
    });
    expect(v.summary.candidate).toEqual({
      provider: 'mock', model: 'cand', samples: 5, requests: 8, quality: expect.closeTo(0.73, 12), mean_score: expect.closeTo(7, 12),
      useful_rate: 0.6, error_rate: 0, p50_latency_ms: 90, mean_cost_usd: null,
    });
    expect(v.summary).toMatchObject({ min_n: 4, max_regression: 0.05, quality_delta: expect.closeTo(-0.055, 12) });
    expect(v.summary.formula).toContain('0.5*mean(score/10)');
  });

  it('a drop within max_regression (equal to it included) completes; a better candidate completes', () => {
    // Candidate 0.05 below: 0.5·0.7 + 0.3·0.75 + 0.2·0.8 = 0.735 vs 0.785.
    const within = evaluateStopRule(makeExperiment(), { baseline: arm(), candidate: arm({ scoreMean: 0.7 }) });
    expect(within.action).toBe('complete');
    expect(evaluateStopRule(makeExperiment(), { baseline: arm(), candidate: arm({ scoreMean: 1, errors: 0 }) }).action).toBe('complete');
    expect(evaluateStopRule(makeExperiment({ stopRule: { minN: 4, maxRegression: 0 } }), { baseline: arm(), candidate: arm({ scoreMean: 0.79 }) }).action).toBe('rollback');
  });

  it('shadow: samples are requests and q = 1 − error_rate (no feedback exists on the candidate)', () => {
    const e = makeExperiment({ type: 'shadow', stopRule: { minN: 10, maxRegression: 0.05 } });
    expect(evaluateStopRule(e, { baseline: arm({ requests: 10, errors: 0 }), candidate: arm({ feedbackSessions: 0, scoreMean: null, usefulRate: null, requests: 9 }) }).action).toBe('wait');
    const v = evaluateStopRule(e, {
      baseline: arm({ requests: 20, errors: 1 }),
      candidate: arm({ feedbackSessions: 0, scoreMean: null, usefulRate: null, requests: 10, errors: 2 }),
    });
    // 0.95 vs 0.8.
    expect(v.action).toBe('rollback');
    if (v.action === 'wait') throw new Error('unreachable');
    expect([v.summary.baseline.quality, v.summary.candidate.quality, v.summary.candidate.samples, v.summary.candidate.useful_rate]).toEqual([0.95, 0.8, 10, null]);
    expect(evaluateStopRule(e, { baseline: arm({ requests: 20, errors: 1 }), candidate: arm({ requests: 10, errors: 1 }) }).action).toBe('complete');
  });
});
