import type { ShadowCall } from '../../../src/experiments/experiment-shadow.runner';
import type { ExperimentRecord } from '../../../src/experiments/experiment.record';
import { makeCaller } from './config';

/** An active canary of organisation `acme`, mock/base against mock/cand, started 1 January 2025 (factory with overrides). */
export function makeExperiment(overrides: Partial<ExperimentRecord> = {}): ExperimentRecord {
  const at = new Date(Date.UTC(2025, 0, 1));
  return {
    id: 'e1',
    orgId: 'acme',
    type: 'canary',
    status: 'active',
    trafficPct: 50,
    baseline: { provider: 'mock', model: 'base' },
    candidate: { provider: 'mock', model: 'cand' },
    stopRule: { minN: 4, maxRegression: 0.05 },
    summary: null,
    startedAt: at,
    endedAt: null,
    createdAt: at,
    createdByKeyId: 'k',
    ...overrides,
  };
}

/** What the chat path hands the shadow runner: acme's request of one user message (factory with overrides). */
export function makeShadowCall(overrides: Partial<ShadowCall> = {}, content = 'hi'): ShadowCall {
  return {
    caller: makeCaller({ features: ['has_test_ab'] }),
    requestId: 'req-1',
    requestedModel: 'auto',
    route: 'default',
    strategy: 'ordered',
    request: { messages: [{ role: 'user', content }] },
    supports: () => undefined,
    ...overrides,
  };
}
