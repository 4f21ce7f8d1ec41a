import { Module } from '@nestjs/common';
import { AggregationJob } from './aggregation.job';
import { StatsSnapshot } from './model-stats';
import { ModelStatsRepository } from './model-stats.repository';
import { StatsSnapshotService } from './stats-snapshot.service';

/**
 * The learning loop (docs/architecture.md "The learning loop"): the aggregation job and the in-memory snapshot routing reads
 * through the `StatsSnapshot` port. The job is exported for the routing benchmark, which drives it
 * in-process.
 */
@Module({
  providers: [ModelStatsRepository, StatsSnapshotService, { provide: StatsSnapshot, useExisting: StatsSnapshotService }, AggregationJob],
  exports: [StatsSnapshot, AggregationJob],
})
export class LearningModule {}
