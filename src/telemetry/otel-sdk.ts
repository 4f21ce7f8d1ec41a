import type { MeterProvider, TextMapPropagator } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPExporterBase } from '@opentelemetry/otlp-exporter-base';
import { convertLegacyHttpOptions, createOtlpHttpExportDelegate } from '@opentelemetry/otlp-exporter-base/node-http';
import { TraceExporterMetricsHelper } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOffSampler, AlwaysOnSampler, BatchSpanProcessor, BufferConfig, ParentBasedSampler, ReadableSpan, Sampler, SpanExporter, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace-base';
import type { OtelConfig } from './otel-env';
import { protobufTraceSerializer } from './otlp-protobuf';
import { SpanRecorder } from './span-record';

/**
 * The OpenTelemetry SDK's part of tracing: the sampler, the batch span processor and the OTLP
 * exporter's transport (retries, timeouts, compression, headers), around the gateway's own span
 * records and protobuf encoder (span-record.ts and otlp-protobuf.ts say why). TelemetryService
 * loads this module only when an OTLP endpoint is configured (docs/architecture.md "OpenTelemetry
 * traces"): the SDK, its exporters and semantic conventions are ≈ 220 modules that a gateway with
 * tracing off would otherwise keep in memory without ever running them.
 */
export interface Tracing {
  recorder: SpanRecorder;
  propagator: TextMapPropagator;
  /** Exports what is still queued, then stops. */
  shutdown(): Promise<void>;
}

type ExporterConfig = NonNullable<ConstructorParameters<typeof OtlpJsonExporter>[0]>;

/** The exporter's name in the SDK's own telemetry (its semantic conventions' `otel.component.type`). */
const COMPONENT_TYPE = 'otlp_http_span_exporter';

/** OTLP/HTTP protobuf, as the SDK's protobuf exporter sends it, with the gateway's encoder. */
function protobufExporter(config: ExporterConfig): SpanExporter {
  const options = convertLegacyHttpOptions(config, 'TRACES', 'v1/traces', { 'Content-Type': 'application/x-protobuf' });
  return new OTLPExporterBase<ReadableSpan[]>(createOtlpHttpExportDelegate(options, protobufTraceSerializer(), COMPONENT_TYPE, TraceExporterMetricsHelper, undefined));
}

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
  const exporter = otel.protocol === 'http/json' ? new OtlpJsonExporter(exporterConfig) : protobufExporter(exporterConfig);
  const processor = new BatchSpanProcessor(exporter, {
    maxQueueSize: otel.batch.maxQueueSize,
    maxExportBatchSize: otel.batch.maxExportBatchSize,
    scheduledDelayMillis: otel.batch.scheduleDelayMs,
    exportTimeoutMillis: otel.batch.exportTimeoutMs,
    selfObsMeterProvider: selfObs,
  } as BufferConfig);
  const resource = resourceFromAttributes({ ...otel.resourceAttributes, 'service.name': otel.serviceName });
  // No global tracer provider: spans are built only by TelemetryService, with their parents passed
  // explicitly, so no context manager (AsyncLocalStorage) runs on the hot path.
  const recorder = new SpanRecorder(processor, samplerOf(otel.sampler), resource, { name: 'routing-gateway' });
  return { recorder, propagator: new W3CTraceContextPropagator(), shutdown: () => processor.shutdown() };
}
