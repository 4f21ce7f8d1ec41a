import { type ModelStats, POOL_ORG, StatsSnapshot } from '../../../src/learning/model-stats';
import { REGRESSION_WINDOW_MS, RegressionsView } from '../../../src/routing/regressions/regressions-view';

type StatsKey = Partial<ModelStats> & Pick<ModelStats, 'orgId' | 'provider' | 'model'>;

const k = (org: string, provider: string, model: string) => `${org}\u0000${provider}\u0000${model}`;

/** One row of the aggregates: no feedback, every request successful (factory with overrides). */
export function makeStats(o: StatsKey): ModelStats {
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

/**
 * The StatsSnapshot port over a map. `set` adds or replaces a row (`orgId` '*' is the pool); an
 * organisation's sample total is the sum of its rows' `n` unless `samples` sets it.
 */
export class FakeStats extends StatsSnapshot {
  private readonly rows = new Map<string, ModelStats>();
  private readonly totals = new Map<string, number>();

  constructor(public refreshedAt: Date | null = null) {
    super();
  }

  set(o: StatsKey): this {
    this.rows.set(k(o.orgId, o.provider, o.model), makeStats(o));
    return this;
  }

  /** Sets the organisation's total samples, whatever its rows say (samples on models outside the test). */
  samples(orgId: string, n: number): this {
    this.totals.set(orgId, n);
    return this;
  }

  get(orgId: string, provider: string, model: string): ModelStats | undefined {
    return this.rows.get(k(orgId, provider, model));
  }

  pool(provider: string, model: string): ModelStats | undefined {
    return this.get(POOL_ORG, provider, model);
  }

  orgSamples(orgId: string): number {
    const set = this.totals.get(orgId);
    if (set !== undefined) return set;
    let n = 0;
    for (const r of this.rows.values()) if (r.orgId === orgId) n += r.n;
    return n;
  }
}

/** The RegressionsView port over a list: `add` records one regression; `recent` answers as the real view does (7 days, newest first). */
export class FakeRegressions extends RegressionsView {
  private readonly rows: Array<{ key: string; at: Date }> = [];

  add(orgId: string, provider: string, model: string, ...at: Date[]): this {
    for (const d of at) this.rows.push({ key: k(orgId, provider, model), at: d });
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
