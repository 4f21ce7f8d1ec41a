import { Module } from '@nestjs/common';
import { CircuitBreakerModule } from '../providers/circuit-breaker/circuit-breaker.module';
import { ProvidersModule } from '../providers/providers.module';
import { DispatcherService } from './dispatcher.service';
import { RoutingService } from './routing.service';

@Module({
  imports: [ProvidersModule, CircuitBreakerModule],
  providers: [RoutingService, DispatcherService],
  exports: [RoutingService, DispatcherService],
})
export class RoutingModule {}
