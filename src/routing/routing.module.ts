import { Module } from '@nestjs/common';
import { LearningModule } from '../learning/learning.module';
import { CircuitBreakerModule } from '../resilience/circuit-breaker/circuit-breaker.module';
import { CircuitBreakerService } from '../resilience/circuit-breaker/circuit-breaker.service';
import { ProvidersModule } from '../providers/providers.module';
import { BreakerView } from '../resilience/circuit-breaker/breaker-view';
import { DispatcherService } from './dispatcher.service';
import { RegressionsModule } from './regressions/regressions.module';
import { RoutingService } from './routing.service';

/**
 * Routing (docs/architecture.md "The routing chain"). RoutingService reads the learning snapshot (`StatsSnapshot`) that
 * LearningModule provides, and the breakers' in-process view (`BreakerView`), which the circuit
 * breaker service keeps.
 */
@Module({
  imports: [ProvidersModule, CircuitBreakerModule, RegressionsModule, LearningModule],
  providers: [
    RoutingService,
    DispatcherService,
    // A factory, not useExisting, so the compiler checks that the service satisfies the port.
    { provide: BreakerView, useFactory: (breakers: CircuitBreakerService): BreakerView => breakers, inject: [CircuitBreakerService] },
  ],
  exports: [RoutingService, DispatcherService, RegressionsModule],
})
export class RoutingModule {}
