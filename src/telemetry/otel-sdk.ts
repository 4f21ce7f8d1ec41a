import type { MeterProvider, TextMapPropagator, Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  BufferConfig,
  ParentBasedSampler,
  Sampler,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-base';
import type { OtelConfig } from './otel-env';

/**
 * The OpenTelemetry SDK's part of tracing: the tracer provider, its batch span processor and the
 * OTLP exporter of the configured encoding. TelemetryService loads this module only when an OTLP
 * endpoint is configured (docs/architecture.md "OpenTelemetry traces"): the SDK, its exporters and
 * semantic conventions are ≈ 220 modules that a gateway with tracing off would otherwise keep in
 * memory without ever running them.
 */
export interface Tracing {
  tracer: Tracer;
  propagator: TextMapPropagator;
  /** Exports what is still queued, then stops. */
  shutdown(): Promise<void>;
}

type ExporterConfig = NonNullable<ConstructorParameters<typeof OtlpProtobufExporter>[0]>;

function samplerOf(s: OtelConfig['sampler']): Sampler {
  switch (s.name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(s.ratio);
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(s.ratio) });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/** Spans batched from a bounded queue to the collector; `selfObs` receives the processor's own metrics. */
export function startTracing(otel: OtelConfig, selfObs: MeterProvider): Tracing {
  const exporterConfig: ExporterConfig = { url: otel.url, headers: otel.headers, timeoutMillis: otel.timeoutMs, compression: otel.compression as ExporterConfig['compression'] };
  const exporter = otel.protocol === 'http/json' ? new OtlpJsonExporter(exporterConfig) : new OtlpProtobufExporter(exporterConfig);
  const processor = new BatchSpanProcessor(exporter, {
    maxQueueSize: otel.batch.maxQueueSize,
    maxExportBatchSize: otel.batch.maxExportBatchSize,
    scheduledDelayMillis: otel.batch.scheduleDelayMs,
    exportTimeoutMillis: otel.batch.exportTimeoutMs,
    selfObsMeterProvider: selfObs,
  } as BufferConfig);
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ ...otel.resourceAttributes, 'service.name': otel.serviceName }),
    sampler: samplerOf(otel.sampler),
    spanProcessors: [processor],
  });
  // Not registered as the global provider: spans are built only by TelemetryService, with their
  // parents passed explicitly, so no context manager (AsyncLocalStorage) runs on the hot path.
  return { tracer: provider.getTracer('routing-gateway'), propagator: new W3CTraceContextPropagator(), shutdown: () => provider.shutdown() };
}
