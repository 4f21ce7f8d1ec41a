import { Module } from '@nestjs/common';
import { LearningModule } from '../learning/learning.module';
import { CircuitBreakerModule } from '../providers/circuit-breaker/circuit-breaker.module';
import { ProvidersModule } from '../providers/providers.module';
import { DispatcherService } from './dispatcher.service';
import { RegressionsModule } from './regressions/regressions.module';
import { RoutingService } from './routing.service';

/**
 * Routing (DESIGN §6). RoutingService reads the learning snapshot (`StatsSnapshot`) that
 * LearningModule provides.
 */
@Module({
  imports: [ProvidersModule, CircuitBreakerModule, RegressionsModule, LearningModule],
  providers: [RoutingService, DispatcherService],
  exports: [RoutingService, DispatcherService, RegressionsModule],
})
export class RoutingModule {}
