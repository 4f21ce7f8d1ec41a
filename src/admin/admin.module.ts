import { Module } from '@nestjs/common';
import { AdminExperimentsModule } from './experiments/admin-experiments.module';
import { AdminExportModule } from './export/admin-export.module';
import { AdminKeysModule } from './keys/admin-keys.module';
import { AdminLimitsModule } from './limits/admin-limits.module';
import { AdminModelsModule } from './models/admin-models.module';
import { AdminProvidersModule } from './providers/admin-providers.module';
import { AdminTracesModule } from './traces/admin-traces.module';
import { AdminUsageModule } from './usage/admin-usage.module';

/**
 * The operators' REST API under /v1/admin (docs/api.md "Admin API"): one sub-module per resource,
 * every route behind the `admin` permission and scoped to the caller's organisation.
 */
@Module({ imports: [AdminKeysModule, AdminExperimentsModule, AdminModelsModule, AdminUsageModule, AdminTracesModule, AdminLimitsModule, AdminProvidersModule, AdminExportModule] })
export class AdminModule {}
