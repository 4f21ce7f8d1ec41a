import { DynamicModule, Module } from '@nestjs/common';
import { AppLogger } from '../common/logging/logger';
import { LoggerModule } from '../common/logging/logger.module';
import { AppConfig } from '../config/app-config';
import { ConfigModule } from '../config/config.module';
import { MetricsModule } from '../metrics/metrics.module';
import { ResilienceModule } from '../resilience/resilience.module';
import { RetentionCliModule } from '../retention/retention.module';
import { StoresModule } from '../stores/stores.module';
import { TenancyModule } from '../tenancy/tenancy.module';

/** What the admin commands need: config, stores, tenancy and retention, without the HTTP layer (and without the periodic jobs). */
@Module({})
export class CliModule {
  static forRoot(config: AppConfig, logger: AppLogger): DynamicModule {
    return {
      module: CliModule,
      imports: [
        ConfigModule.forRoot(config),
        LoggerModule.forRoot(logger),
        MetricsModule,
        ResilienceModule,
        StoresModule,
        TenancyModule,
        RetentionCliModule,
      ],
    };
  }
}
