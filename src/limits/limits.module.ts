import { Module } from '@nestjs/common';
import { LimitsService } from './limits.service';
import { MonthlyUsageRepository } from './monthly-usage.repository';

/** Per-key rate limits and per-organisation monthly limits (docs/architecture.md "One limiter for every limit"). */
@Module({ providers: [LimitsService, MonthlyUsageRepository], exports: [LimitsService] })
export class LimitsModule {}
