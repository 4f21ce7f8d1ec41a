import { BeforeApplicationShutdown, Injectable, OnApplicationBootstrap, Optional } from '@nestjs/common';
import { Periodic } from '../../common/lifecycle/periodic';
import { AppConfig } from '../../config/app-config';
import { StoreFallback } from '../../resilience/store-fallback';
import { RegressionsRepository } from './regressions.repository';
import { REGRESSION_WINDOW_MS, RegressionRecord, RegressionsView } from './regressions-view';

const keyOf = (orgId: string, provider: string, model: string) => `${orgId}\u0000${provider}\u0000${model}`;

/**
 * The 7-day regression record held in memory (routing must not query SQL per request). Reloaded
 * whole from the table every `learning.refresh_seconds` — the same beat as the stats snapshot — so
 * regressions recorded by other replicas show within one beat; a regression recorded through this
 * replica's RegressionsService is added at once. A failed reload keeps the previous view.
 */
@Injectable()
export class RegressionsSnapshotService extends RegressionsView implements OnApplicationBootstrap, BeforeApplicationShutdown {
  /** Dates per (org, provider, model), newest first. */
  private byKey = new Map<string, Date[]>();
  private readonly periodic = new Periodic(() => this.reload());

  constructor(
    @Optional() private readonly repo?: RegressionsRepository,
    @Optional() private readonly config?: AppConfig,
    @Optional() private readonly fallback?: StoreFallback,
  ) {
    super();
  }

  async onApplicationBootstrap(): Promise<void> {
    if (!this.repo || !this.config) return;
    await this.reload();
    this.periodic.start(this.config.gateway.learning.refresh_seconds * 1000);
  }

  /** Ends the beat; a reload under way is not waited for (it only replaces memory). */
  beforeApplicationShutdown(): void {
    void this.periodic.stop();
  }

  recent(orgId: string, provider: string, model: string, now: Date): readonly Date[] {
    const all = this.byKey.get(keyOf(orgId, provider, model));
    if (!all) return [];
    const since = now.getTime() - REGRESSION_WINDOW_MS;
    return all.filter((d) => d.getTime() >= since && d.getTime() <= now.getTime());
  }

  /** Replaces the whole view (a reload). */
  replace(rows: readonly RegressionRecord[]): void {
    const next = new Map<string, Date[]>();
    for (const r of rows) {
      const k = keyOf(r.orgId, r.provider, r.model);
      const list = next.get(k) ?? [];
      list.push(r.createdAt);
      next.set(k, list);
    }
    for (const list of next.values()) list.sort((a, b) => b.getTime() - a.getTime());
    this.byKey = next;
  }

  /** Adds one just-recorded regression (visible to this replica before the next reload). */
  add(r: RegressionRecord): void {
    const k = keyOf(r.orgId, r.provider, r.model);
    const list = [r.createdAt, ...(this.byKey.get(k) ?? [])].sort((a, b) => b.getTime() - a.getTime());
    const next = new Map(this.byKey);
    next.set(k, list);
    this.byKey = next;
  }

  /** Loads the last 7 days from the table; never rejects. */
  async reload(): Promise<boolean> {
    if (!this.repo) return false;
    try {
      this.replace(await this.repo.listSince(new Date(Date.now() - REGRESSION_WINDOW_MS)));
      return true;
    } catch (err) {
      this.fallback?.failed('analytics', 'routing:regressions-snapshot', err, { effect: 'previous regressions view kept' });
      return false;
    }
  }
}
