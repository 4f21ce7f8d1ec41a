import { Module } from '@nestjs/common';
import { TelemetryService } from './telemetry.service';

/** OpenTelemetry traces (docs/architecture.md "OpenTelemetry traces"); the request context middleware opens each request's span. */
@Module({ providers: [TelemetryService], exports: [TelemetryService] })
export class TelemetryModule {}
