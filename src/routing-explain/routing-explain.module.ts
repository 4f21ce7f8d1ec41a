import { Module } from '@nestjs/common';
import { LimitsModule } from '../limits/limits.module';
import { RoutingModule } from '../routing/routing.module';
import { RoutingExplainController } from './routing-explain.controller';
import { RoutingExplainService } from './routing-explain.service';

/**
 * The routing explain dry-run (docs/api.md "POST /v1/routing/explain"). Imports the routing chain
 * and the limits (whose explain limit it spends): no traces or dispatcher, so it cannot write or
 * call upstream, and it spends no other limit.
 */
@Module({ imports: [RoutingModule, LimitsModule], controllers: [RoutingExplainController], providers: [RoutingExplainService] })
export class RoutingExplainModule {}
