import { Injectable } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { assertUnreachable } from '../common/errors/error-catalogue';
import type { Caller } from '../common/http/request-context';
import type { TargetRef } from '../config/gateway-config';
import type { RoutingDecision } from '../routing/routing.types';
import { ExperimentShadowRunner, type ShadowCall } from './experiment-shadow.runner';
import type { ExperimentArm, ExperimentRecord } from './experiment.record';
import { ExperimentsService } from './experiments.service';

export type { ExperimentArm };

/**
 * What a decision trace records in `experiment_arm`. A request whose own arm's target did not serve
 * it (that target failed or was unavailable, and the fallback went to the other arm or further down
 * the plan) is `<arm>_fallback`: never a sample of either arm, and a failure of its own arm's target
 * in the stop rules' error rate (experiment-quality.ts).
 */
export type TraceArm = ExperimentArm | 'baseline_fallback' | 'candidate_fallback';

/** The experiment step of routing (docs/architecture.md "The routing chain", step 6) for one request. */
export interface ExperimentSplit {
  /** The targets to dispatch, in order: the candidate first for a canary's candidate arm, else the routed plan unchanged. */
  plan: TargetRef[];
  /** The experiment that applies; null when none does. */
  experimentId: string | null;
  /** The arm the request belongs to; null when no experiment applies. */
  arm: ExperimentArm | null;
  /** Shadow experiments: the candidate to send a background copy to once the baseline answered. */
  shadow?: { experimentId: string; target: TargetRef };
}

const same = (a: TargetRef, b: TargetRef): boolean => a.provider === b.provider && a.model === b.model;

/**
 * Where a key falls in [0, 100): the first 4 bytes of sha256(experiment id ':' key) as a fraction of
 * 2^32. The experiment id is part of the input so that two experiments split sessions independently.
 */
export function splitPoint(experimentId: string, key: string): number {
  return (createHash('sha256').update(`${experimentId}:${key}`).digest().readUInt32BE(0) / 2 ** 32) * 100;
}

/**
 * The arm to record on a request's decision trace, given the target that served it (undefined when
 * none did: the request failed). See TraceArm.
 */
export function traceArm(split: ExperimentSplit, served: TargetRef | undefined): TraceArm | null {
  if (split.experimentId === null || split.arm === null) return null;
  if (served === undefined || same(served, split.plan[0])) return split.arm;
  return split.arm === 'candidate' ? 'candidate_fallback' : 'baseline_fallback';
}

/** Experiments apply to the same organisations the API serves: Pro, `has_test_ab`, kill switch off (docs/api.md "Authentication"). */
function experimentsOn(caller: Caller): boolean {
  return caller.plan === 'pro' && caller.features.includes('has_test_ab') && !caller.killSwitches.includes('experiments');
}

/**
 * The chat path's experiment step (docs/architecture.md "Experiments in the chat path"). After routing chose
 * the plan, the organisation's oldest active experiment whose baseline is the selected pair
 * (`plan[0]`) applies:
 * - canary: `traffic_pct` percent of sessions, sticky by a hash of the session id (else of the
 *   request id), go to the candidate, with the routed plan kept behind it as the fallback; the other
 *   sessions are the baseline arm;
 * - shadow: every request is served by the baseline (arm `baseline`); for `traffic_pct` percent of
 *   sessions (same hash) a copy goes to the candidate in the background once the baseline answered.
 * Nothing applies when the organisation's `experiments` kill switch is on or it lost the feature.
 * Rollbacks are seen on the next request on every replica (ExperimentsService.activeFor).
 */
@Injectable()
export class ExperimentRouter {
  constructor(
    private readonly experiments: ExperimentsService,
    private readonly shadows: ExperimentShadowRunner,
  ) {}

  /** Never throws: a failure here leaves the routed plan as it was. */
  async apply(caller: Caller, decision: Pick<RoutingDecision, 'plan'>, sessionId: string | null, requestId: string): Promise<ExperimentSplit> {
    const unchanged: ExperimentSplit = { plan: decision.plan, experimentId: null, arm: null };
    try {
      const selected = decision.plan[0];
      if (selected === undefined || !experimentsOn(caller)) return unchanged;
      const e = (await this.experiments.activeFor(caller.orgId)).find((x) => x.status === 'active' && same(x.baseline, selected));
      if (!e) return unchanged;
      return split(e, decision.plan, splitPoint(e.id, sessionId ?? requestId) < e.trafficPct);
    } catch {
      return unchanged;
    }
  }

  /** See traceArm(); here so ChatService needs one dependency. */
  traceArm(split: ExperimentSplit, served: TargetRef | undefined): TraceArm | null {
    return traceArm(split, served);
  }

  /**
   * Fire-and-forget: sends the shadow copy when the split asks for one and the baseline itself served
   * the request. Returns at once; the copy never touches the client's response. True when a copy started.
   */
  shadow(split: ExperimentSplit, served: TargetRef | undefined, call: ShadowCall): boolean {
    if (!split.shadow || split.experimentId === null || served === undefined || !same(served, split.plan[0])) return false;
    return this.shadows.run(split.shadow, call);
  }
}

function split(e: ExperimentRecord, plan: TargetRef[], inShare: boolean): ExperimentSplit {
  switch (e.type) {
    case 'canary':
      return inShare
        ? { plan: [e.candidate, ...plan.filter((t) => !same(t, e.candidate))], experimentId: e.id, arm: 'candidate' }
        : { plan, experimentId: e.id, arm: 'baseline' };
    case 'shadow':
      return inShare ? { plan, experimentId: e.id, arm: 'baseline', shadow: { experimentId: e.id, target: e.candidate } } : { plan, experimentId: e.id, arm: 'baseline' };
    default:
      return assertUnreachable(e.type);
  }
}
