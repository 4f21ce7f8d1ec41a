/**
 * What tracing costs a request by itself (docs/architecture.md "OpenTelemetry traces"), for a
 * developer's check: not a test, it asserts nothing; the file name (`*.bench.ts`) keeps it out of
 * `npm test`. Run:
 *
 *   npx jest --config jest.config.js --testMatch '<rootDir>/bench/span-cost.bench.ts' --runInBand
 *
 * A traced request's telemetry, in this process and without a gateway around it: its SERVER span,
 * one CLIENT span, the decision's attributes, the batch span processor, and each batch encoded as
 * OTLP protobuf (not sent: the transport is the SDK's either way). Sides, each in every position
 * of the order over SPAN_COST_ROUNDS (default 5) rounds of SPAN_COST_REQUESTS (default 20,000)
 * requests:
 * - `records`: the gateway's code (RequestSpan on span-record.ts, otlp-protobuf.ts's encoder);
 * - `sdk`: the same spans made as the gateway made them before, with the SDK's tracer and span
 *   and its protobuf serialiser (the reference below);
 * - `untraced`: none of it, only the garbage below.
 * Each request also leaves SPAN_COST_GARBAGE_KB (default 100, about what a gateway's request
 * allocates) of short-lived objects, so collections run as often as in a gateway and what spans
 * hold until their batch leaves is copied by them as it would be there.
 * Prints CPU µs per request of each side per round (this thread's user + system time, collections
 * included), each over `sdk`, and each side's cost over `untraced`, medians of the rounds;
 * SPAN_COST_OUT=FILE also writes them as JSON.
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
const GARBAGE_KB = Number(process.env.SPAN_COST_GARBAGE_KB ?? 100);

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

/** Where each request's garbage goes, so that it is made (not optimised away) and dies with the next request's. */
export let sink: unknown;
/** Garbage a request leaves besides its spans, as a gateway's request does (its allocations die young). */
function garbage(): void {
  const n = Math.round((GARBAGE_KB * 1024) / 40);
  if (n === 0) return;
  const a = new Array<{ j: number; s: string }>(n);
  for (let j = 0; j < n; j++) a[j] = { j, s: `x${j}` };
  sink = a;
}

async function round(run: (t: DecisionTrace) => void, flush: () => Promise<void>): Promise<number> {
  const traces = Array.from({ length: 256 }, (_, i) => decision(i));
  const before = process.cpuUsage();
  for (let i = 0; i < REQUESTS; i++) {
    run(traces[i % traces.length]);
    garbage();
    // Let the processor export between bursts, as a gateway's event loop does between requests.
    if (i % 256 === 255) await new Promise((r) => setImmediate(r));
  }
  await flush();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / REQUESTS;
}

it('a traced request: the gateway records against the SDK', async () => {
  const sampler = new ParentBasedSampler({ root: new AlwaysOnSampler() });
  const sdkExporter = new EncodingExporter((spans) => ProtobufTraceSerializer.serializeRequest(spans));
  const sdkProvider = new BasicTracerProvider({ resource, sampler, spanProcessors: [processor(sdkExporter)] });
  const tracer = sdkProvider.getTracer('routing-gateway');
  const encoder = new OtlpProtobufEncoder();
  const ourExporter = new EncodingExporter((spans) => encoder.encode(spans));
  const ourProcessor = processor(ourExporter);
  const recorder = new SpanRecorder(ourProcessor, sampler, resource, { name: 'routing-gateway' });

  const sides: Record<string, () => Promise<number>> = {
    sdk: () => round((t) => sdkRequest(tracer, t), () => sdkProvider.forceFlush()),
    records: () => round((t) => recordRequest(recorder, t), () => ourProcessor.forceFlush()),
    ...(GARBAGE_KB > 0 ? { untraced: () => round(() => undefined, () => Promise.resolve()) } : {}),
  };
  const names = Object.keys(sides);
  // Warm every side up first: the optimising compiler's work is not a request's.
  for (const name of names) await sides[name]();
  const out: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
  for (let r = 0; r < ROUNDS; r++) {
    // Every side in every position: rotate the order by one each round.
    for (const name of names.map((_, i) => names[(i + r) % names.length])) out[name].push(await sides[name]());
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const spread = (xs: number[]) => ({ median: median(xs), min: Math.min(...xs), max: Math.max(...xs) });
  const overSdk = Object.fromEntries(names.map((n) => [n, spread(out[n].map((x, i) => x / out.sdk[i]))]));
  const tracing = GARBAGE_KB > 0 ? Object.fromEntries(names.filter((n) => n !== 'untraced').map((n) => [n, spread(out[n].map((x, i) => x - out.untraced[i]))])) : undefined;
  process.stdout.write(
    `span cost, ${ROUNDS} × ${REQUESTS} requests (two spans each, ${GARBAGE_KB} KB of other garbage each), CPU µs per request:\n` +
      names.map((n) => `  ${n.padEnd(18)} ${out[n].map((x) => x.toFixed(1)).join(' ')}  median ${median(out[n]).toFixed(1)}; over sdk ${overSdk[n].median.toFixed(3)} (${overSdk[n].min.toFixed(3)}–${overSdk[n].max.toFixed(3)})` + (tracing?.[n] ? `; over untraced +${tracing[n].median.toFixed(1)} µs` : '')).join('\n') +
      `\n  bytes exported: sdk ${sdkExporter.bytes}, records ${ourExporter.bytes}\n`,
  );
  if (process.env.SPAN_COST_OUT) {
    const meta = { date: new Date().toISOString(), node: process.version, cpu: cpus()[0]?.model, requests_per_round: REQUESTS, rounds: ROUNDS, garbage_kb_per_request: GARBAGE_KB };
    writeFileSync(process.env.SPAN_COST_OUT, JSON.stringify({ meta, cpu_us_per_request: out, over_sdk: overSdk, tracing_us_per_request: tracing }, null, 2) + '\n');
  }
  await sdkProvider.shutdown();
  await ourProcessor.shutdown();
}, 900_000);
