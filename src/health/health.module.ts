import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { CircuitBreakerModule } from '../resilience/circuit-breaker/circuit-breaker.module';
import { HealthController } from './health.controller';
import { HealthService } from './health.service';

@Module({ imports: [TerminusModule, CircuitBreakerModule], controllers: [HealthController], providers: [HealthService] })
export class HealthModule {}
