/**
 * In-memory fakes and factories for the routing specs (fakes over mocks, factories with
 * overrides). Not used by the application.
 */
import type { Caller } from '../../common/http/request-context';
import { AppConfig } from '../../config/app-config';
import { loadEnv } from '../../config/env';
import { loadGatewayConfig } from '../../config/gateway-config';
import { ModelStats, POOL_ORG, StatsSnapshot } from '../../learning/model-stats';
import { RegressionsView, REGRESSION_WINDOW_MS } from '../regressions/regressions-view';
import { RoutingClock } from '../routing.service';
import type { RoutingInput } from '../routing.types';

const k = (org: string, provider: string, model: string) => `${org}\u0000${provider}\u0000${model}`;

export function makeStats(o: Partial<ModelStats> & Pick<ModelStats, 'orgId' | 'provider' | 'model'>): ModelStats {
  return {
    n: 0,
    outcomeMean: 0,
    outcomeVar: 0,
    scoreMean: 0,
    scoreVar: 0,
    usefulRate: 0,
    usefulVar: 0,
    successRate: 1,
    requests: o.n ?? 0,
    latencyP50Ms: null,
    latencyP90Ms: null,
    latencyP99Ms: null,
    costMeanUsd: null,
    npsDetractors: 0,
    npsPassives: 0,
    npsPromoters: 0,
    computedAt: new Date(0),
    ...o,
  };
}

/** The StatsSnapshot port over a map; `set` replaces a row. */
export class FakeStats extends StatsSnapshot {
  private readonly rows = new Map<string, ModelStats>();
  refreshedAt: Date | null = null;

  set(o: Partial<ModelStats> & Pick<ModelStats, 'orgId' | 'provider' | 'model'>): this {
    this.rows.set(k(o.orgId, o.provider, o.model), makeStats(o));
    return this;
  }

  get(orgId: string, provider: string, model: string): ModelStats | undefined {
    return this.rows.get(k(orgId, provider, model));
  }

  pool(provider: string, model: string): ModelStats | undefined {
    return this.get(POOL_ORG, provider, model);
  }

  orgSamples(orgId: string): number {
    let n = 0;
    for (const r of this.rows.values()) if (r.orgId === orgId) n += r.n;
    return n;
  }
}

export class FakeRegressions extends RegressionsView {
  private readonly rows: Array<{ key: string; at: Date }> = [];

  add(orgId: string, provider: string, model: string, at: Date): this {
    this.rows.push({ key: k(orgId, provider, model), at });
    return this;
  }

  recent(orgId: string, provider: string, model: string, now: Date): readonly Date[] {
    const key = k(orgId, provider, model);
    return this.rows
      .filter((r) => r.key === key && r.at.getTime() <= now.getTime() && r.at.getTime() >= now.getTime() - REGRESSION_WINDOW_MS)
      .map((r) => r.at)
      .sort((a, b) => b.getTime() - a.getTime());
  }
}

export class FixedClock extends RoutingClock {
  constructor(public at: Date) {
    super();
  }

  now(): Date {
    return this.at;
  }
}

export const makeConfig = (yaml: string): AppConfig => new AppConfig(loadEnv({}), loadGatewayConfig(yaml, {}));

export function makeCaller(overrides: Partial<Caller> = {}): Caller {
  return {
    orgId: 'acme',
    keyId: 'acme-rw',
    plan: 'pro',
    features: ['feedback_routing', 'explain'],
    permissions: ['read', 'write'],
    killSwitches: [],
    monthlyRequestLimit: null,
    ...overrides,
  };
}

export function makeInput(overrides: Partial<RoutingInput> = {}): RoutingInput {
  return {
    caller: makeCaller(),
    model: 'auto',
    messages: [{ role: 'user', content: 'Hello there' }],
    sessionId: null,
    requestId: 'req-1',
    mode: 'dry-run',
    ...overrides,
  };
}

/** A seeded uniform source for live draws. */
export { mulberry32 as seededRandom } from '../strategies/random';
