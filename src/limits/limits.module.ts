import { Module } from '@nestjs/common';
import { LimitsService } from './limits.service';
import { MonthlySpendRepository } from './monthly-spend.repository';
import { MonthlyUsageRepository } from './monthly-usage.repository';

/** Every limit: rate limits, monthly limits, the per-key and per-organisation controls (docs/architecture.md "One limiter for every limit"). */
@Module({ providers: [LimitsService, MonthlyUsageRepository, MonthlySpendRepository], exports: [LimitsService] })
export class LimitsModule {}
