import { Module } from '@nestjs/common';
import { RegressionDetector } from './regression.detector';
import { RegressionsRepository } from './regressions.repository';
import { RegressionsService } from './regressions.service';
import { RegressionsSnapshotService } from './regressions-snapshot.service';
import { RegressionsView } from './regressions-view';

/**
 * The regression record (docs/architecture.md "Regressions"): its table, the in-memory 7-day view routing reads, the recorder
 * other features call (experiments on rollback), and the quality-drop detector. Its own module so
 * that experiments can import it without importing routing.
 */
@Module({
  providers: [
    RegressionsRepository,
    RegressionsSnapshotService,
    { provide: RegressionsView, useExisting: RegressionsSnapshotService },
    RegressionsService,
    RegressionDetector,
  ],
  exports: [RegressionsView, RegressionsService],
})
export class RegressionsModule {}
