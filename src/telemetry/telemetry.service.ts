import { BeforeApplicationShutdown, Injectable } from '@nestjs/common';
import { Attributes, createNoopMeter, defaultTextMapGetter, Meter, MeterProvider, ObservableCallback, ROOT_CONTEXT, SpanKind } from '@opentelemetry/api';
import type { IncomingHttpHeaders } from 'node:http';
import { Counter, Gauge } from 'prom-client';
import { AppLogger } from '../common/logging/logger';
import { ThrottledWarning } from '../common/logging/throttled-warning';
import { AppConfig } from '../config/app-config';
import { MetricsService } from '../metrics/metrics.service';
import { withTimeout } from '../stores/with-timeout';
import { ATTR } from './gen-ai';
import type { Tracing } from './otel-sdk';
import { PassThroughTelemetry, RequestSpan, RequestTelemetry } from './request-telemetry';
import { clientTraceHeaders } from './trace-context';

/** Spans still queued at shutdown are exported within this bound (docs/architecture.md "Graceful shutdown"), or one export's timeout if shorter. */
const SHUTDOWN_FLUSH_MS = 5_000;

/** The batch span processor's own self-observability metrics (OpenTelemetry SDK semantic conventions), bridged into /metrics. */
const PROCESSED = 'otel.sdk.processor.span.processed';
const QUEUE_SIZE = 'otel.sdk.processor.span.queue.size';

/** Liveness and scrape paths: a span each would bury the requests worth tracing. */
const UNTRACED = /^\/(health|metrics)(\/|$)/;

type DropReason = 'queue_full' | 'export_failed' | 'shutdown';

/**
 * OpenTelemetry traces over OTLP/HTTP (docs/architecture.md "OpenTelemetry traces"): a SERVER span
 * per request, a CLIENT span per upstream call, exported in batches from a bounded queue, so a slow
 * or dead collector costs no request anything and memory stays bounded; what cannot be exported is
 * counted in `gateway_otel_spans_dropped_total`. Off unless an OTLP endpoint is configured; then no
 * span object is ever built.
 */
@Injectable()
export class TelemetryService implements BeforeApplicationShutdown {
  private readonly tracing?: Tracing;
  private readonly dropped: Counter<'reason'>;
  private readonly exported: Counter;
  private readonly warning: ThrottledWarning;
  private queueSize?: () => number;
  private readonly flushMs: number;

  constructor(config: AppConfig, metrics: MetricsService, logger: AppLogger) {
    this.dropped = new Counter({
      name: 'gateway_otel_spans_dropped_total',
      help: 'Spans not exported: queue_full (the bounded queue was full), export_failed (the collector failed or did not answer), shutdown (left at exit)',
      labelNames: ['reason'] as const,
      registers: [metrics.registry],
    });
    this.exported = new Counter({ name: 'gateway_otel_spans_exported_total', help: 'Spans the collector accepted', registers: [metrics.registry] });
    const queueDepth = () => this.queueSize?.() ?? 0;
    new Gauge({
      name: 'gateway_otel_span_queue_depth',
      help: 'Spans waiting in the batch queue for export',
      registers: [metrics.registry],
      collect() {
        this.set(queueDepth());
      },
    });
    this.warning = new ThrottledWarning(logger.pino);

    const otel = config.env.otel;
    this.flushMs = Math.min(SHUTDOWN_FLUSH_MS, otel?.timeoutMs ?? SHUTDOWN_FLUSH_MS);
    if (!otel) return;
    // The SDK is loaded only now, with tracing on (otel-sdk.ts says why).
    const { startTracing } = require('./otel-sdk') as typeof import('./otel-sdk');
    this.tracing = startTracing(otel, this.processorMeter());
    logger.pino.info({ topic: 'otel', endpoint: new URL(otel.url).origin, protocol: otel.protocol, sampler: otel.sampler.name }, 'OpenTelemetry traces on');
  }

  /**
   * The request's telemetry (RequestContextMiddleware): its server span when tracing is on; the
   * client's trace headers to pass on when it is off; else nothing.
   */
  begin(req: { headers: IncomingHttpHeaders; method: string; originalUrl: string }): RequestTelemetry | undefined {
    const { headers } = req;
    const tracing = this.tracing;
    if (tracing === undefined) {
      if (headers.traceparent === undefined) return undefined;
      const h = clientTraceHeaders(headers.traceparent, headers.tracestate);
      return h && new PassThroughTelemetry(h);
    }
    const q = req.originalUrl.indexOf('?');
    const path = q < 0 ? req.originalUrl : req.originalUrl.slice(0, q);
    if (UNTRACED.test(path)) return undefined;
    const parent = headers.traceparent === undefined ? ROOT_CONTEXT : tracing.propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter);
    const span = tracing.recorder.start(req.method, SpanKind.SERVER, { [ATTR.httpMethod]: req.method }, parent);
    return new RequestSpan(tracing.recorder, span, path === '/v1/embeddings' ? 'embeddings' : 'chat');
  }

  /** SIGTERM (docs/architecture.md "Graceful shutdown"): the spans still queued are exported within a bound; what is left is counted. */
  async beforeApplicationShutdown(): Promise<void> {
    if (!this.tracing) return;
    try {
      await withTimeout(this.tracing.shutdown(), this.flushMs, 'span export');
    } catch {
      const left = this.queueSize?.() ?? 0;
      if (left > 0) this.drop(left, 'shutdown');
    }
  }

  private drop(n: number, reason: DropReason): void {
    this.dropped.inc({ reason }, n);
    this.warning.warn(`otel-${reason}`, `${n} span(s) not exported (${reason})`);
  }

  /**
   * A meter provider for the batch span processor's self-observability only: spans processed
   * (exported, dropped as queue_full, or failed with the export's error) and the queue's size.
   */
  private processorMeter(): MeterProvider {
    const meter: Meter = createNoopMeter();
    const noopCounter = meter.createCounter('unused');
    meter.createCounter = (name: string) => {
      if (name !== PROCESSED) return noopCounter;
      return {
        add: (n: number, attributes?: Attributes) => {
          const error = attributes?.[ATTR.errorType];
          if (error === undefined) this.exported.inc(n);
          else this.drop(n, error === 'queue_full' ? 'queue_full' : 'export_failed');
        },
      };
    };
    const noopObservable = meter.createObservableUpDownCounter('unused');
    meter.createObservableUpDownCounter = (name: string) => {
      if (name !== QUEUE_SIZE) return noopObservable;
      return {
        addCallback: (cb: ObservableCallback) => {
          this.queueSize = () => {
            let size = 0;
            void cb({ observe: (v: number) => (size = v) });
            return size;
          };
        },
        removeCallback: () => undefined,
      };
    };
    return { getMeter: () => meter };
  }
}
