import { Injectable } from '@nestjs/common';
import { RegressionsRepository } from './regressions.repository';
import { RegressionsSnapshotService } from './regressions-snapshot.service';
import type { RegressionReason } from './regressions-view';

/**
 * Records regressions: the quality-drop detector, and experiments when one
 * is rolled back (`experiment_rolled_back`). Same signature as the experiments module's
 * ExperimentRegressionSink port, so it can be bound to it with `useExisting`. The row is written
 * synchronously (a failure rejects, for the caller to log); this replica's routing view sees it at
 * once, the other replicas at their next reload.
 */
@Injectable()
export class RegressionsService {
  constructor(
    private readonly repo: RegressionsRepository,
    private readonly view: RegressionsSnapshotService,
  ) {}

  /** `detail`: ids and figures only, never prompt text. */
  async record(orgId: string, provider: string, model: string, reason: RegressionReason | (string & {}), detail: Record<string, unknown> | null = null): Promise<void> {
    const row = await this.repo.insert(orgId, provider, model, reason, detail);
    this.view.add(row);
  }
}
