import { Module } from '@nestjs/common';
import { LimitsModule } from '../../limits/limits.module';
import { TenancyModule } from '../../tenancy/tenancy.module';
import { AdminLimitsController } from './admin-limits.controller';
import { AdminLimitsService } from './admin-limits.service';

/** The controls of the caller's organisation and its keys (docs/api.md "Admin API", limits); tenancy owns the records. */
@Module({ imports: [TenancyModule, LimitsModule], controllers: [AdminLimitsController], providers: [AdminLimitsService] })
export class AdminLimitsModule {}
