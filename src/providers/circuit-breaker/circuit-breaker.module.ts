import { Module } from '@nestjs/common';
import { CircuitBreakerService } from './circuit-breaker.service';

/** Per-provider circuit breakers shared through the cache store (issue 4 "Routing"). */
@Module({ providers: [CircuitBreakerService], exports: [CircuitBreakerService] })
export class CircuitBreakerModule {}
