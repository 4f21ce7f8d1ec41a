import { makeCaller as kitCaller, makeExperiment as kitExperiment, makeShadowCall } from '../../test/support/kit';
import type { Caller } from '../common/http/request-context';
import type { TargetRef } from '../config/gateway-config';
import type { ExperimentShadowRunner, ShadowCall } from './experiment-shadow.runner';
import type { ExperimentRecord } from './experiment.record';
import { ExperimentRouter, type ExperimentSplit, splitPoint, traceArm } from './experiment.router';
import type { ExperimentsService } from './experiments.service';

const BASE: TargetRef = { provider: 'openai', model: 'gpt-4o-mini' };
const CAND: TargetRef = { provider: 'groq', model: 'llama-3.1-8b' };
const OTHER: TargetRef = { provider: 'anthropic', model: 'claude-haiku' };

const makeCaller = (overrides: Partial<Caller> = {}): Caller => kitCaller({ features: ['has_test_ab'], ...overrides });

let ids = 0;
/** An active canary of BASE against CAND at 30 %, each with an id of its own. */
const makeExperiment = (overrides: Partial<ExperimentRecord> = {}): ExperimentRecord =>
  kitExperiment({
    id: `00000000-0000-4000-8000-${String(++ids).padStart(12, '0')}`,
    trafficPct: 30,
    baseline: BASE,
    candidate: CAND,
    stopRule: { minN: 100, maxRegression: 0.05 },
    createdByKeyId: 'acme-rw',
    ...overrides,
  });

/** The one method of ExperimentsService the router reads, over a list the test sets. */
class FakeExperiments {
  list: ExperimentRecord[] = [];
  calls = 0;
  failing = false;
  async activeFor(orgId: string): Promise<readonly ExperimentRecord[]> {
    this.calls++;
    if (this.failing) throw new Error('boom');
    return this.list.filter((e) => e.orgId === orgId);
  }
}

/** Records the copies it was asked to start. */
class FakeShadowRunner {
  started: Array<{ shadow: { experimentId: string; target: TargetRef }; call: ShadowCall }> = [];
  run(shadow: { experimentId: string; target: TargetRef }, call: ShadowCall): boolean {
    this.started.push({ shadow, call });
    return true;
  }
}

function setup(list: ExperimentRecord[] = []) {
  const experiments = new FakeExperiments();
  experiments.list = list;
  const shadows = new FakeShadowRunner();
  const router = new ExperimentRouter(experiments as unknown as ExperimentsService, shadows as unknown as ExperimentShadowRunner);
  return { router, experiments, shadows };
}

const decision = (plan: TargetRef[] = [BASE, OTHER]) => ({ plan });
const shadowCall = (): ShadowCall => makeShadowCall();

describe('splitPoint', () => {
  it('is deterministic, in [0, 100), independent per experiment, and uniform', () => {
    expect(splitPoint('e1', 's1')).toBe(splitPoint('e1', 's1'));
    let below30 = 0;
    let differs = 0;
    for (let i = 0; i < 10_000; i++) {
      const p = splitPoint('e1', `session-${i}`);
      expect(p).toBeGreaterThanOrEqual(0);
      expect(p).toBeLessThan(100);
      if (p < 30) below30++;
      if (p < 30 !== splitPoint('e2', `session-${i}`) < 30) differs++;
    }
    // 10,000 draws at 30 %: sd ≈ 0.46 points, so ±2 points is over 4 sd.
    expect(below30 / 100).toBeGreaterThan(28);
    expect(below30 / 100).toBeLessThan(32);
    // Independent experiments disagree on about 2·0.3·0.7 = 42 % of sessions.
    expect(differs / 100).toBeGreaterThan(38);
    expect(differs / 100).toBeLessThan(46);
  });
});

describe('ExperimentRouter.apply (canary)', () => {
  it('sends traffic_pct of sessions to the candidate (2,000 sessions at 30 % → 30 % ± 4 %), sticky per session', async () => {
    const e = makeExperiment({ trafficPct: 30 });
    const { router } = setup([e]);
    const first = new Map<string, string | null>();
    for (let i = 0; i < 2_000; i++) {
      const s = await router.apply(makeCaller(), decision(), `sess-${i}`, `req-${i}`);
      expect(s.experimentId).toBe(e.id);
      first.set(`sess-${i}`, s.arm);
    }
    const share = ([...first.values()].filter((a) => a === 'candidate').length / 2_000) * 100;
    expect(share).toBeGreaterThan(26);
    expect(share).toBeLessThan(34);
    // Same session, another request id: same arm.
    for (let i = 0; i < 2_000; i += 7) {
      expect((await router.apply(makeCaller(), decision(), `sess-${i}`, `other-req-${i}`)).arm).toBe(first.get(`sess-${i}`));
    }
  });

  it('candidate arm: the candidate first, then the routed plan as the fallback; baseline arm: the plan unchanged', async () => {
    const e = makeExperiment({ trafficPct: 100 });
    const { router, experiments } = setup([e]);
    expect(await router.apply(makeCaller(), decision([BASE, OTHER]), 's', 'r')).toEqual({ plan: [CAND, BASE, OTHER], experimentId: e.id, arm: 'candidate' });
    // The candidate already in the routed plan is not tried twice.
    expect((await router.apply(makeCaller(), decision([BASE, CAND, OTHER]), 's', 'r')).plan).toEqual([CAND, BASE, OTHER]);
    experiments.list = [{ ...e, trafficPct: 0 }];
    expect(await router.apply(makeCaller(), decision([BASE, OTHER]), 's', 'r')).toEqual({ plan: [BASE, OTHER], experimentId: e.id, arm: 'baseline' });
  });

  it('without a session id, by request id: the same request id always lands alike, and the share holds', async () => {
    const e = makeExperiment({ trafficPct: 30 });
    const { router } = setup([e]);
    let candidate = 0;
    for (let i = 0; i < 2_000; i++) {
      const a = await router.apply(makeCaller(), decision(), null, `req-${i}`);
      const b = await router.apply(makeCaller(), decision(), null, `req-${i}`);
      expect(b.arm).toBe(a.arm);
      expect(a.arm).toBe(splitPoint(e.id, `req-${i}`) < 30 ? 'candidate' : 'baseline');
      if (a.arm === 'candidate') candidate++;
    }
    expect(candidate / 20).toBeGreaterThan(26);
    expect(candidate / 20).toBeLessThan(34);
  });

  it('applies only when the selected pair (plan[0]) is the baseline, to the oldest such experiment', async () => {
    const older = makeExperiment({ trafficPct: 100 });
    const newer = makeExperiment({ trafficPct: 100, candidate: OTHER });
    const { router } = setup([older, newer, makeExperiment({ orgId: 'other', baseline: OTHER })]);
    expect((await router.apply(makeCaller(), decision([BASE]), 's', 'r')).experimentId).toBe(older.id);
    expect(await router.apply(makeCaller(), decision([OTHER, BASE]), 's', 'r')).toEqual({ plan: [OTHER, BASE], experimentId: null, arm: null });
    expect(await router.apply(makeCaller(), decision([]), 's', 'r')).toEqual({ plan: [], experimentId: null, arm: null });
  });

  it.each([
    ['the experiments kill switch', { killSwitches: ['experiments'] }],
    ['the free plan', { plan: 'free' }],
    ['no has_test_ab', { features: ['explain'] }],
  ] as Array<[string, Partial<Caller>]>)('nothing applies under %s, and the store is not asked', async (_name, overrides) => {
    const { router, experiments } = setup([makeExperiment({ trafficPct: 100 })]);
    expect(await router.apply(makeCaller(overrides), decision(), 's', 'r')).toEqual({ plan: [BASE, OTHER], experimentId: null, arm: null });
    expect(experiments.calls).toBe(0);
    // The next request without the switch is in the experiment again.
    expect((await router.apply(makeCaller(), decision(), 's', 'r')).arm).toBe('candidate');
  });

  it('never throws: a failure leaves the routed plan as it was', async () => {
    const { router, experiments } = setup([makeExperiment({ trafficPct: 100 })]);
    experiments.failing = true;
    expect(await router.apply(makeCaller(), decision(), 's', 'r')).toEqual({ plan: [BASE, OTHER], experimentId: null, arm: null });
  });
});

describe('ExperimentRouter.apply (shadow) and shadow()', () => {
  it('serves the baseline for every request; traffic_pct of sessions get a shadow target', async () => {
    const e = makeExperiment({ type: 'shadow', trafficPct: 30 });
    const { router } = setup([e]);
    let mirrored = 0;
    for (let i = 0; i < 2_000; i++) {
      const s = await router.apply(makeCaller(), decision(), `sess-${i}`, `req-${i}`);
      expect([s.plan, s.experimentId, s.arm]).toEqual([[BASE, OTHER], e.id, 'baseline']);
      if (s.shadow) {
        expect(s.shadow).toEqual({ experimentId: e.id, target: CAND });
        mirrored++;
      }
    }
    expect(mirrored / 20).toBeGreaterThan(26);
    expect(mirrored / 20).toBeLessThan(34);
  });

  it('starts a copy only when the split asks for one and the baseline itself served', async () => {
    const e = makeExperiment({ type: 'shadow', trafficPct: 100 });
    const { router, shadows } = setup([e]);
    const s = await router.apply(makeCaller(), decision(), 's', 'r');
    expect(router.shadow(s, OTHER, shadowCall())).toBe(false);
    expect(router.shadow(s, undefined, shadowCall())).toBe(false);
    expect(router.shadow({ ...s, shadow: undefined }, BASE, shadowCall())).toBe(false);
    expect(shadows.started).toHaveLength(0);
    expect(router.shadow(s, BASE, shadowCall())).toBe(true);
    expect(shadows.started.map((x) => x.shadow)).toEqual([{ experimentId: e.id, target: CAND }]);
  });
});

describe('traceArm', () => {
  const candidateArm: ExperimentSplit = { plan: [CAND, BASE], experimentId: 'e', arm: 'candidate' };
  const baselineArm: ExperimentSplit = { plan: [BASE, OTHER], experimentId: 'e', arm: 'baseline' };
  it.each([
    ['no experiment → null', { plan: [BASE], experimentId: null, arm: null }, BASE, null],
    ['candidate served → candidate', candidateArm, CAND, 'candidate'],
    ['candidate failed, baseline served (fell back across arms) → candidate_fallback', candidateArm, BASE, 'candidate_fallback'],
    ['candidate arm, nothing served (a failure of the arm) → candidate', candidateArm, undefined, 'candidate'],
    ['baseline served → baseline', baselineArm, BASE, 'baseline'],
    ['baseline failed, another target served → baseline_fallback', baselineArm, OTHER, 'baseline_fallback'],
    ['baseline failed, the candidate (also in the routed plan) served → baseline_fallback', { ...baselineArm, plan: [BASE, CAND] }, CAND, 'baseline_fallback'],
  ] as Array<[string, ExperimentSplit, TargetRef | undefined, string | null]>)('%s', (_name, split, served, arm) => {
    expect(traceArm(split, served)).toBe(arm);
  });
});
