import { Module } from '@nestjs/common';
import { AdminUsageController } from './admin-usage.controller';
import { AdminUsageService } from './admin-usage.service';
import { UsageRollupJob } from './usage-rollup.job';
import { UsageRollupRepository } from './usage-rollup.repository';
import { UsageReader } from './usage-reader';

/**
 * Usage time series (docs/api.md "Admin API", usage), read from the usage rollups and the traces
 * they have not taken in yet (docs/architecture.md "Usage from rollups"); the job keeps the rollups
 * up to date. The raw reader (TraceUsageRepository) is the tests' oracle. The job is exported for
 * the analytics bench, which drives it in-process.
 */
@Module({
  controllers: [AdminUsageController],
  providers: [AdminUsageService, UsageRollupRepository, UsageRollupJob, { provide: UsageReader, useExisting: UsageRollupRepository }],
  exports: [UsageRollupJob],
})
export class AdminUsageModule {}
