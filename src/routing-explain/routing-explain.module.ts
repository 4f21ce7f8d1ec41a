import { Module } from '@nestjs/common';
import { RoutingModule } from '../routing/routing.module';
import { RoutingExplainController } from './routing-explain.controller';
import { RoutingExplainService } from './routing-explain.service';

/**
 * The routing explain dry-run (docs/api.md "POST /v1/routing/explain"). Imports the routing
 * chain only: no limits, traces or dispatcher, so it cannot spend, write or call upstream.
 */
@Module({ imports: [RoutingModule], controllers: [RoutingExplainController], providers: [RoutingExplainService] })
export class RoutingExplainModule {}
