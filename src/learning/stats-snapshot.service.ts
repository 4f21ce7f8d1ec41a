import { Injectable } from '@nestjs/common';
import { ModelStats, POOL_ORG, StatsSnapshot } from './model-stats';

const keyOf = (orgId: string, provider: string, model: string): string => `${orgId}\u0000${provider}\u0000${model}`;

/**
 * The in-memory copy of `model_stats` that routing and explain read synchronously (docs/architecture.md
 * "The learning loop"). The aggregation job replaces it whole after each run; a failed refresh leaves
 * the previous one in place. Readers never see a half-replaced snapshot: the maps are swapped in one
 * assignment.
 */
@Injectable()
export class StatsSnapshotService extends StatsSnapshot {
  private state: { byKey: Map<string, ModelStats>; samplesByOrg: Map<string, number>; at: Date | null } = {
    byKey: new Map(),
    samplesByOrg: new Map(),
    at: null,
  };

  get refreshedAt(): Date | null {
    return this.state.at;
  }

  get(orgId: string, provider: string, model: string): ModelStats | undefined {
    return this.state.byKey.get(keyOf(orgId, provider, model));
  }

  pool(provider: string, model: string): ModelStats | undefined {
    return this.get(POOL_ORG, provider, model);
  }

  /** Σ n over the organisation's models (a session served by two models counts for each). */
  orgSamples(orgId: string): number {
    return this.state.samplesByOrg.get(orgId) ?? 0;
  }

  /** Every row of the table at `at`; replaces what was held. */
  replace(rows: readonly ModelStats[], at: Date): void {
    const byKey = new Map<string, ModelStats>();
    const samplesByOrg = new Map<string, number>();
    for (const r of rows) {
      byKey.set(keyOf(r.orgId, r.provider, r.model), Object.freeze({ ...r }));
      samplesByOrg.set(r.orgId, (samplesByOrg.get(r.orgId) ?? 0) + r.n);
    }
    this.state = { byKey, samplesByOrg, at };
  }
}
