import { Module } from '@nestjs/common';
import { AdminUsageController } from './admin-usage.controller';
import { AdminUsageService } from './admin-usage.service';
import { TraceUsageRepository } from './trace-usage.repository';
import { UsageReader } from './usage-reader';

/**
 * Usage time series (docs/api.md "Admin API", usage). The reader is the raw decision traces today;
 * an adapter over hourly rollups replaces it here, and nothing else changes.
 */
@Module({
  controllers: [AdminUsageController],
  providers: [AdminUsageService, TraceUsageRepository, { provide: UsageReader, useExisting: TraceUsageRepository }],
})
export class AdminUsageModule {}
