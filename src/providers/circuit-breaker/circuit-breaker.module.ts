import { Module } from '@nestjs/common';
import { CircuitBreakerOptions, CircuitBreakerService } from './circuit-breaker.service';

/**
 * Per-provider circuit breakers shared through the cache store (issue 4 "Routing"). The tuning is a
 * provider of its own (the defaults), so a test can override it.
 */
@Module({
  providers: [CircuitBreakerService, { provide: CircuitBreakerOptions, useValue: {} }],
  exports: [CircuitBreakerService],
})
export class CircuitBreakerModule {}
