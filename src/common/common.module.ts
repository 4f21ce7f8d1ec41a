import { Global, Module } from '@nestjs/common';
import { TelemetryModule } from '../telemetry/telemetry.module';
import { ConfirmationGuard, FeatureGuard, PermissionGuard } from './auth/access.guards';
import { GatewayExceptionFilter } from './errors/gateway-exception.filter';
import { RequestContextMiddleware } from './http/request-context.middleware';
import { DrainState } from './lifecycle/drain-state';
import { RequestLogger } from './logging/request-logger';

/** Cross-cutting pieces: guards, the exception filter, body parsing, request context, draining. */
@Global()
@Module({
  // The request context middleware (applied in AppModule) opens each request's span.
  imports: [TelemetryModule],
  providers: [
    PermissionGuard,
    FeatureGuard,
    ConfirmationGuard,
    GatewayExceptionFilter,
    RequestContextMiddleware,
    RequestLogger,
    DrainState,
  ],
  exports: [TelemetryModule, PermissionGuard, FeatureGuard, ConfirmationGuard, GatewayExceptionFilter, RequestContextMiddleware, RequestLogger, DrainState],
})
export class CommonModule {}
