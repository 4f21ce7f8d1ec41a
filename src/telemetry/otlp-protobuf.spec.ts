import { Attributes, Context, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, TraceFlags } from '@opentelemetry/api';
import { TraceState } from '@opentelemetry/core';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  InMemorySpanExporter,
  ParentBasedSampler,
  ReadableSpan,
  Sampler,
  SimpleSpanProcessor,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-base';
import { OtlpProtobufEncoder } from './otlp-protobuf';
import { SpanRecorder } from './span-record';

/**
 * The gateway's span records and its OTLP/protobuf encoder against the SDK: the encoder must write
 * exactly the bytes of the SDK's own serialiser, for the gateway's spans and for any span the SDK
 * makes; the records must follow the configured sampler as the SDK's tracer does.
 */

const sdkBytes = (spans: ReadableSpan[]): Buffer => Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!);
const ourBytes = (spans: ReadableSpan[], encoder = new OtlpProtobufEncoder()): Buffer => Buffer.from(encoder.encode(spans));

const RESOURCE = resourceFromAttributes({ 'service.name': 'gateway-test', 'deployment.environment': 'ci' });
const SCOPE = { name: 'routing-gateway' };

function recorder(sampler: Sampler = new ParentBasedSampler({ root: new AlwaysOnSampler() })): { rec: SpanRecorder; ended: InMemorySpanExporter } {
  const ended = new InMemorySpanExporter();
  return { rec: new SpanRecorder(new SimpleSpanProcessor(ended), sampler, RESOURCE, SCOPE), ended };
}

const REMOTE_TRACE = '0af7651916cd43dd8448eb211c80319c';
const REMOTE_SPAN = 'b7ad6b7169203331';
const remote = (flags = TraceFlags.SAMPLED): Context =>
  trace.setSpanContext(ROOT_CONTEXT, { traceId: REMOTE_TRACE, spanId: REMOTE_SPAN, traceFlags: flags, isRemote: true, traceState: new TraceState('vendor=opaque,other=x') });

/** Every kind of value an attribute takes, and strings that need more than one length byte or byte per character. */
const EVERY_VALUE: Attributes = {
  'gen_ai.request.model': 'gpt-4o-mini-2024-07-18',
  'gateway.route': 'café ☕ — ünïcödé',
  'gateway.long': 'x'.repeat(300),
  'gen_ai.usage.input_tokens': 1234,
  'gateway.negative': -42,
  'gateway.large': 2 ** 40 + 3,
  'gen_ai.request.temperature': 0.7,
  'gateway.cost_usd': 1.5e-7,
  'gateway.fallback_used': false,
  'gen_ai.request.stream': true,
  'gen_ai.response.finish_reasons': ['stop'],
  'gateway.list': ['a', 'b', 'ünï'],
  'gateway.numbers': [1, 2.5, -3],
  'gateway.empty': [],
};

/** A request as the gateway traces it: a server span under the client's, two calls (one failed), a first-token event. */
function gatewayRequest(rec: SpanRecorder, parent: Context): void {
  const server = rec.start('POST', SpanKind.SERVER, { 'http.request.method': 'POST' }, parent);
  const failed = rec.start('chat gpt-4o', SpanKind.CLIENT, { 'gen_ai.operation.name': 'chat', 'gateway.attempt': 1 }, rec.contextOf(server));
  failed.setAttribute('error.type', 'upstream_error');
  failed.setStatus({ code: SpanStatusCode.ERROR });
  failed.end();
  const served = rec.start('chat backup', SpanKind.CLIENT, { 'gen_ai.operation.name': 'chat', 'gateway.attempt': 2 }, rec.contextOf(server));
  Object.assign(server.attributesToSet()!, EVERY_VALUE);
  server.addEvent('gateway.first_token', rec.at(process.hrtime.bigint() - 1_000_000n));
  server.updateName('chat gpt');
  server.setStatus({ code: SpanStatusCode.ERROR, message: 'the upstream ended the stream — early' });
  served.end();
  server.end();
}

describe('OtlpProtobufEncoder', () => {
  it("writes the SDK serialiser's bytes for the gateway's spans: remote parent with trace state, every attribute value, events, statuses", () => {
    const { rec, ended } = recorder();
    gatewayRequest(rec, remote());
    gatewayRequest(rec, ROOT_CONTEXT);
    const spans = ended.getFinishedSpans();
    expect(spans).toHaveLength(6);
    expect(ourBytes(spans).equals(sdkBytes(spans))).toBe(true);
  });

  it("writes the SDK serialiser's bytes for the SDK's own spans, with links, several resources and scopes", () => {
    const spans: ReadableSpan[] = [];
    for (const service of ['a', 'b']) {
      const ended = new InMemorySpanExporter();
      const provider = new BasicTracerProvider({ resource: resourceFromAttributes({ 'service.name': service }), spanProcessors: [new SimpleSpanProcessor(ended)] });
      for (const [scope, version] of [['one', undefined], ['two', '1.2.3']] as const) {
        const tracer = provider.getTracer(scope, version);
        const parent = tracer.startSpan('parent', { kind: SpanKind.INTERNAL, attributes: EVERY_VALUE }, remote());
        const child = tracer.startSpan(
          'child',
          { kind: SpanKind.PRODUCER, links: [{ context: parent.spanContext(), attributes: { why: 'batch' } }, { context: trace.getSpanContext(remote())! }] },
          trace.setSpan(ROOT_CONTEXT, parent),
        );
        child.addEvent('with attributes', { n: 1, s: 'x' });
        child.addEvent('without');
        child.end();
        parent.end();
      }
      spans.push(...ended.getFinishedSpans());
    }
    expect(ourBytes(spans).equals(sdkBytes(spans))).toBe(true);
  });

  it('writes batches past its first buffer and past a two-byte length; each result stays its own after the next', () => {
    const { rec, ended } = recorder();
    for (let i = 0; i < 200; i++) gatewayRequest(rec, i % 2 ? remote() : ROOT_CONTEXT);
    const big = ended.getFinishedSpans();
    const small = big.slice(0, 3);
    const encoder = new OtlpProtobufEncoder();
    const first = ourBytes(big, encoder);
    const kept = Buffer.from(first);
    expect(first.length).toBeGreaterThan(64 * 1024);
    expect(first.equals(sdkBytes(big))).toBe(true);
    expect(ourBytes(small, encoder).equals(sdkBytes(small))).toBe(true);
    expect(first.equals(kept)).toBe(true);
    expect(ourBytes(big, encoder).equals(kept)).toBe(true);
  });

});

describe('SpanRecorder', () => {
  it('a span under a remote parent keeps its trace, trace state and parent; under none, a new trace id', () => {
    const { rec } = recorder();
    const child = rec.start('GET', SpanKind.SERVER, {}, remote());
    expect(child.spanContext()).toMatchObject({ traceId: REMOTE_TRACE, traceFlags: TraceFlags.SAMPLED });
    expect(child.spanContext().traceState?.serialize()).toBe('vendor=opaque,other=x');
    expect(child.parentSpanContext?.spanId).toBe(REMOTE_SPAN);
    const root = rec.start('GET', SpanKind.SERVER, {}, ROOT_CONTEXT);
    expect(root.parentSpanContext).toBeUndefined();
    expect(root.spanContext().traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(root.spanContext().spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(root.spanContext().traceId).not.toBe(REMOTE_TRACE);
    const ids = new Set(Array.from({ length: 1000 }, () => rec.start('x', SpanKind.SERVER, {}, ROOT_CONTEXT).spanContext().spanId));
    expect(ids.size).toBe(1000);
  });

  it('follows the sampler: not recorded spans keep a context to pass on, record nothing and reach no processor', () => {
    const off = recorder(new AlwaysOffSampler());
    const span = off.rec.start('GET', SpanKind.SERVER, { a: 1 }, ROOT_CONTEXT);
    span.setAttribute('b', 2);
    span.end();
    expect(span.isRecording()).toBe(false);
    expect(span.attributes).toEqual({});
    expect(span.spanContext().traceFlags).toBe(TraceFlags.NONE);
    expect(off.ended.getFinishedSpans()).toHaveLength(0);

    // Parent-based: a remote parent not sampled is followed; a sampled one too.
    const pb = recorder();
    pb.rec.start('GET', SpanKind.SERVER, {}, remote(TraceFlags.NONE)).end();
    pb.rec.start('GET', SpanKind.SERVER, {}, remote(TraceFlags.SAMPLED)).end();
    expect(pb.ended.getFinishedSpans().map((s) => s.spanContext().traceFlags)).toEqual([TraceFlags.SAMPLED]);

    // A ratio of 0.5 samples about half the traces, and a trace's spans alike.
    const half = recorder(new TraceIdRatioBasedSampler(0.5));
    let sampled = 0;
    for (let i = 0; i < 2000; i++) {
      const s = half.rec.start('GET', SpanKind.SERVER, {}, ROOT_CONTEXT);
      const c = half.rec.start('call', SpanKind.CLIENT, {}, half.rec.contextOf(s));
      expect(c.spanContext().traceFlags).toBe(s.spanContext().traceFlags);
      if (s.spanContext().traceFlags === TraceFlags.SAMPLED) sampled++;
    }
    expect(sampled).toBeGreaterThan(800);
    expect(sampled).toBeLessThan(1200);
  });

  it('times: the wall clock to the millisecond, in order within a request, an event at the time of the reading it was given', () => {
    const { rec, ended } = recorder();
    const before = BigInt(Date.now()) * 1_000_000n;
    const server = rec.start('GET', SpanKind.SERVER, {}, ROOT_CONTEXT);
    const call = rec.start('call', SpanKind.CLIENT, {}, rec.contextOf(server));
    const hr = process.hrtime.bigint();
    server.addEvent('gateway.first_token', rec.at(hr - 5_000_000n));
    call.end();
    server.end();
    const after = BigInt(Date.now() + 1) * 1_000_000n;
    const ns = (t: [number, number]): bigint => BigInt(t[0]) * 1_000_000_000n + BigInt(t[1]);
    const [c, s] = ended.getFinishedSpans();
    for (const t of [s.startTime, c.startTime, c.endTime, s.endTime]) {
      expect(t[1]).toBeGreaterThanOrEqual(0);
      expect(t[1]).toBeLessThan(1e9);
      expect(ns(t)).toBeGreaterThanOrEqual(before - 1_000_000n);
      expect(ns(t)).toBeLessThanOrEqual(after);
    }
    expect(ns(s.startTime)).toBeLessThanOrEqual(ns(c.startTime));
    expect(ns(c.endTime)).toBeLessThanOrEqual(ns(s.endTime));
    // Two readings of two clocks each: equal to a tenth of a millisecond.
    const off = ns(s.events[0].time) - (ns(rec.at(hr)) - 5_000_000n);
    expect(off < 100_000n && off > -100_000n).toBe(true);
    expect(ns(s.duration)).toBe(ns(s.endTime) - ns(s.startTime));
  });
});
