import { Module } from '@nestjs/common';
import { CircuitBreakerModule } from '../../resilience/circuit-breaker/circuit-breaker.module';
import { AdminProvidersController } from './admin-providers.controller';
import { AdminProvidersRepository } from './admin-providers.repository';
import { AdminProvidersService } from './admin-providers.service';

/** Providers for operators (docs/api.md "Admin API", providers): breakers, their transitions, traffic. */
@Module({ imports: [CircuitBreakerModule], controllers: [AdminProvidersController], providers: [AdminProvidersService, AdminProvidersRepository] })
export class AdminProvidersModule {}
