import { Module } from '@nestjs/common';
import { CircuitBreakerOptions, CircuitBreakerService } from './circuit-breaker.service';

/**
 * Per-provider circuit breakers shared through the cache store (docs/architecture.md "Circuit breakers").
 * The tuning is a provider of its own (the documented defaults), so a test can override it.
 */
@Module({
  providers: [CircuitBreakerService, { provide: CircuitBreakerOptions, useValue: {} }],
  exports: [CircuitBreakerService],
})
export class CircuitBreakerModule {}
