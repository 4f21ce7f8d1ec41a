/**
 * What tracing costs a request by itself (docs/architecture.md "OpenTelemetry traces"), for a
 * developer's check: not a test, it asserts nothing; the file name (`*.bench.ts`) keeps it out of
 * `npm test`. Run:
 *
 *   npx jest --config jest.config.js --testMatch '<rootDir>/bench/span-cost.bench.ts' --runInBand
 *
 * A traced request's telemetry, in this process and without a gateway around it: its SERVER span,
 * one CLIENT span, the decision's attributes, the batch span processor, and each batch encoded as
 * OTLP protobuf (not sent: the transport is the SDK's either way). Two sides, alternated for
 * SPAN_COST_ROUNDS (default 5) rounds of SPAN_COST_REQUESTS (default 20,000) requests each:
 * - `records`: the gateway's code (RequestSpan on span-record.ts, otlp-protobuf.ts's encoder);
 * - `sdk`: the same spans made as the gateway made them before, with the SDK's tracer and span
 *   and its protobuf serialiser (the reference below).
 * Prints CPU µs per request of each side per round (this thread's user + system time, collections
 * included) and their ratio, median of the rounds; SPAN_COST_OUT=FILE also writes them as JSON.
 */
import { Attributes, Context, ROOT_CONTEXT, Span, SpanKind, SpanStatusCode, trace, Tracer } from '@opentelemetry/api';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOnSampler, BasicTracerProvider, BatchSpanProcessor, ParentBasedSampler, ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { ExportResult } from '@opentelemetry/core';
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import type { TargetRef } from '../src/config/gateway-config';
import type { UpstreamTarget } from '../src/providers/provider-adapter';
import { ATTR, decisionAttributes, GenAiRequest, paramAttributes } from '../src/telemetry/gen-ai';
import { OtlpProtobufEncoder } from '../src/telemetry/otlp-protobuf';
import { RequestSpan } from '../src/telemetry/request-telemetry';
import { SpanRecorder } from '../src/telemetry/span-record';
import type { DecisionTrace } from '../src/traces/decision-trace';
import { trace as decisionTrace } from '../test/stores/decision-traces-by-day.contract';

const REQUESTS = Number(process.env.SPAN_COST_REQUESTS ?? 20_000);
const ROUNDS = Number(process.env.SPAN_COST_ROUNDS ?? 5);

/** Encodes each batch as the OTLP exporter would before sending it; counts bytes so the work is not optimised away. */
class EncodingExporter implements SpanExporter {
  bytes = 0;
  constructor(private readonly encode: (spans: ReadableSpan[]) => Uint8Array | undefined) {}
  export(spans: ReadableSpan[], done: (r: ExportResult) => void): void {
    this.bytes += this.encode(spans)?.length ?? 0;
    done({ code: 0 });
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

const processor = (exporter: SpanExporter) => new BatchSpanProcessor(exporter, { maxQueueSize: 2048, maxExportBatchSize: 512, scheduledDelayMillis: 5000 });
const resource = resourceFromAttributes({ 'service.name': 'gateway-bench' });

const target: TargetRef = { provider: 'openai', model: 'gpt' };
const upstream = { upstream: 'gpt-4o-mini-2024-07-18', provider: { family: 'openai' } } as UpstreamTarget;
const genAi: GenAiRequest = { params: { temperature: 0.7, max_completion_tokens: 256 }, stream: false, confidence: 0.8 };
const decision = (i: number): DecisionTrace =>
  decisionTrace({
    requestId: `req-${i.toString(16).padStart(12, '0')}-bench`,
    sessionId: null,
    strategy: 'learned',
    candidates: [
      { provider: 'openai', model: 'gpt', score: 0.8 },
      { provider: 'spare', model: 'backup', score: 0.6 },
    ],
    selectedProvider: 'openai',
    selectedModel: 'gpt',
    latencyMs: 12.5,
    promptTokens: 120,
    completionTokens: 48,
    costUsd: 0.0000321,
  });

/** The reference: a request's spans as the gateway made them with the SDK's tracer before it kept its own records. */
function sdkRequest(tracer: Tracer, t: DecisionTrace): void {
  const server = tracer.startSpan('POST', { kind: SpanKind.SERVER, attributes: { [ATTR.httpMethod]: 'POST' } }, ROOT_CONTEXT);
  const parent: Context = trace.setSpan(ROOT_CONTEXT, server);
  const call: Span = tracer.startSpan(
    'chat gpt-4o-mini-2024-07-18',
    {
      kind: SpanKind.CLIENT,
      attributes: { [ATTR.operation]: 'chat', [ATTR.provider]: 'openai', [ATTR.requestModel]: upstream.upstream, [ATTR.gwProvider]: target.provider, [ATTR.gwModel]: target.model, [ATTR.attempt]: 1 },
    },
    parent,
  );
  call.spanContext();
  const a: Attributes = {};
  decisionAttributes(a, t);
  a[ATTR.provider] = 'openai';
  a[ATTR.responseModel] = upstream.upstream;
  paramAttributes(a, genAi);
  a[ATTR.confidence] = 0.8;
  server.setAttributes(a);
  call.end();
  server.updateName('chat auto');
  server.setAttribute(ATTR.httpRoute, '/v1/chat/completions');
  server.setAttribute(ATTR.httpStatus, 200);
  if (t.status >= 500) server.setStatus({ code: SpanStatusCode.ERROR });
  server.end();
}

/** The gateway's own: the RequestSpan the middleware, dispatcher and decision builder drive. */
function recordRequest(recorder: SpanRecorder, t: DecisionTrace): void {
  const span = new RequestSpan(recorder, recorder.start('POST', SpanKind.SERVER, { [ATTR.httpMethod]: 'POST' }, ROOT_CONTEXT), 'chat');
  const call = span.upstreamCall(target, upstream, 1);
  call.succeeded();
  span.decided(t, upstream, genAi, process.hrtime.bigint());
  span.responded(200, 'POST', '/v1/chat/completions');
}

async function round(run: (t: DecisionTrace) => void, flush: () => Promise<void>): Promise<number> {
  const traces = Array.from({ length: 256 }, (_, i) => decision(i));
  const before = process.cpuUsage();
  for (let i = 0; i < REQUESTS; i++) {
    run(traces[i % traces.length]);
    // Let the processor export between bursts, as a gateway's event loop does between requests.
    if (i % 256 === 255) await new Promise((r) => setImmediate(r));
  }
  await flush();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / REQUESTS;
}

it('a traced request: the gateway records against the SDK', async () => {
  const sdkExporter = new EncodingExporter((spans) => ProtobufTraceSerializer.serializeRequest(spans));
  const sdkProvider = new BasicTracerProvider({ resource, sampler: new ParentBasedSampler({ root: new AlwaysOnSampler() }), spanProcessors: [processor(sdkExporter)] });
  const tracer = sdkProvider.getTracer('routing-gateway');
  const encoder = new OtlpProtobufEncoder();
  const ourExporter = new EncodingExporter((spans) => encoder.encode(spans));
  const ourProcessor = processor(ourExporter);
  const recorder = new SpanRecorder(ourProcessor, new ParentBasedSampler({ root: new AlwaysOnSampler() }), resource, { name: 'routing-gateway' });

  const sides = {
    sdk: () => round((t) => sdkRequest(tracer, t), () => sdkProvider.forceFlush()),
    records: () => round((t) => recordRequest(recorder, t), () => ourProcessor.forceFlush()),
  };
  // Warm both up first: the optimising compiler's work is not a request's.
  await sides.sdk();
  await sides.records();
  const out: Record<keyof typeof sides, number[]> = { sdk: [], records: [] };
  for (let r = 0; r < ROUNDS; r++) {
    for (const side of (r % 2 ? ['records', 'sdk'] : ['sdk', 'records']) as Array<keyof typeof sides>) out[side].push(await sides[side]());
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const ratios = out.records.map((x, i) => x / out.sdk[i]);
  process.stdout.write(
    `span cost, ${ROUNDS} × ${REQUESTS} requests (two spans each), CPU µs per request:\n` +
      `  sdk     ${out.sdk.map((x) => x.toFixed(1)).join(' ')}  median ${median(out.sdk).toFixed(1)}\n` +
      `  records ${out.records.map((x) => x.toFixed(1)).join(' ')}  median ${median(out.records).toFixed(1)}\n` +
      `  records / sdk, median ${median(ratios).toFixed(3)} (${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)}); bytes exported ${sdkExporter.bytes} / ${ourExporter.bytes}\n`,
  );
  if (process.env.SPAN_COST_OUT) {
    const meta = { date: new Date().toISOString(), node: process.version, cpu: cpus()[0]?.model, requests_per_round: REQUESTS, rounds: ROUNDS };
    writeFileSync(process.env.SPAN_COST_OUT, JSON.stringify({ meta, cpu_us_per_request: out, records_over_sdk: { median: median(ratios), min: Math.min(...ratios), max: Math.max(...ratios) } }, null, 2) + '\n');
  }
  await sdkProvider.shutdown();
  await ourProcessor.shutdown();
}, 600_000);
