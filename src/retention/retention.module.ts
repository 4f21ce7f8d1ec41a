import { Module } from '@nestjs/common';
import { RetentionJob } from './retention.job';
import { RetentionRepository } from './retention.repository';
import { RetentionService } from './retention.service';
import { TracePartitionsRepository } from './trace-partitions.repository';

/**
 * Retention (docs/architecture.md "Retention"): the decision-trace partitions for the coming days and
 * the pruning of what is past `retention.*`, by the retention job on every replica.
 */
@Module({
  providers: [TracePartitionsRepository, RetentionRepository, RetentionService, RetentionJob],
  exports: [RetentionService],
})
export class RetentionModule {}

/** The same service, without the periodic job: for the CLI. */
@Module({
  providers: [TracePartitionsRepository, RetentionRepository, RetentionService],
  exports: [RetentionService],
})
export class RetentionCliModule {}
