import { Attributes, AttributeValue, Context, HrTime, Link, ROOT_CONTEXT, SamplingDecision, SpanContext, SpanKind, SpanStatus, SpanStatusCode, trace, TraceFlags } from '@opentelemetry/api';
import { hrTimeDuration, InstrumentationScope } from '@opentelemetry/core';
import type { Resource } from '@opentelemetry/resources';
import type { ReadableSpan, Sampler, SpanProcessor, TimedEvent } from '@opentelemetry/sdk-trace-base';
import { randomFillSync } from 'node:crypto';

/**
 * The gateway's spans, recorded without the SDK's general-purpose span (docs/architecture.md
 * "OpenTelemetry traces"). The SDK's span validates and truncates each attribute as it is set,
 * converts its clock for each span, draws ids four bytes at a time and builds a context object per
 * span: for two spans a request, about half of what tracing cost a traced gateway (its CPU
 * profile), the serialiser the other half. These spans hold only what OTLP exports, with
 * attributes the gateway sets itself (numbers, booleans, strings and string lists: nothing to
 * sanitise), and satisfy the SDK's `ReadableSpan`, so its batch span processor, samplers and JSON
 * serialiser take them as they take its own.
 */

const NO_EVENTS: TimedEvent[] = Object.freeze([]) as unknown as TimedEvent[];
const NO_LINKS: Link[] = Object.freeze([]) as unknown as Link[];
const UNSET: SpanStatus = Object.freeze({ code: SpanStatusCode.UNSET });

/**
 * Wall-clock time from the monotonic clock (`performance.now()`): anchored to `Date.now()` at most a
 * second before, so the spans of a request share an anchor and their order and durations are the
 * monotonic clock's.
 */
class Clock {
  private anchorMs = Date.now();
  private anchorPerf = performance.now();

  now(): HrTime {
    const p = performance.now();
    if (p - this.anchorPerf >= 1000) {
      this.anchorMs = Date.now();
      this.anchorPerf = p;
    }
    return hrTimeOf(this.anchorMs + (p - this.anchorPerf));
  }

  /** The wall-clock time of a `process.hrtime.bigint()` reading. */
  at(hr: bigint): HrTime {
    const now = this.now();
    return hrTimeOf(now[0] * 1000 + now[1] / 1e6 - Number(process.hrtime.bigint() - hr) / 1e6);
  }
}

/** Epoch milliseconds as [seconds, nanoseconds], nanoseconds below 10^9 (the SDK's `millisToHrTime` can round up to 10^9). */
function hrTimeOf(ms: number): HrTime {
  let s = Math.floor(ms / 1000);
  let ns = Math.round((ms - s * 1000) * 1e6);
  if (ns >= 1e9) {
    s += 1;
    ns -= 1e9;
  }
  return [s, ns];
}

const ZERO_TRACE_ID = '0'.repeat(32);
const ZERO_SPAN_ID = '0'.repeat(16);

/** Random ids from a pool refilled 4 KiB at a time; never all zeros (W3C Trace Context). */
class Ids {
  private readonly pool = Buffer.allocUnsafe(4096);
  private at = this.pool.length;

  private hex(bytes: number): string {
    for (;;) {
      if (this.at + bytes > this.pool.length) {
        randomFillSync(this.pool);
        this.at = 0;
      }
      const id = this.pool.toString('hex', this.at, this.at + bytes);
      this.at += bytes;
      if (id !== ZERO_TRACE_ID && id !== ZERO_SPAN_ID) return id;
    }
  }
  traceId(): string {
    return this.hex(16);
  }
  spanId(): string {
    return this.hex(8);
  }
}

/** One span: what OTLP exports of it, nothing more. Ended once; a span not recording keeps nothing but its context. */
export class SpanRecord implements ReadableSpan {
  events: TimedEvent[] = NO_EVENTS;
  readonly links: Link[] = NO_LINKS;
  status: SpanStatus = UNSET;
  endTime: HrTime = [0, 0];
  ended = false;
  readonly droppedAttributesCount = 0;
  readonly droppedEventsCount = 0;
  readonly droppedLinksCount = 0;

  constructor(
    private readonly recorder: SpanRecorder,
    public name: string,
    readonly kind: SpanKind,
    private readonly context: SpanContext,
    readonly parentSpanContext: SpanContext | undefined,
    readonly attributes: Attributes,
    readonly startTime: HrTime,
    private readonly recording: boolean,
  ) {}

  get resource(): Resource {
    return this.recorder.resource;
  }
  get instrumentationScope(): InstrumentationScope {
    return this.recorder.scope;
  }
  get duration(): HrTime {
    return hrTimeDuration(this.startTime, this.endTime);
  }

  spanContext(): SpanContext {
    return this.context;
  }
  isRecording(): boolean {
    return this.recording && !this.ended;
  }
  setAttribute(key: string, value: AttributeValue): void {
    if (this.isRecording()) this.attributes[key] = value;
  }
  /** The attributes to add to in place while the span records (the decision's many, without an object between); else undefined. */
  attributesToSet(): Attributes | undefined {
    return this.isRecording() ? this.attributes : undefined;
  }
  setStatus(status: SpanStatus): void {
    if (this.isRecording()) this.status = status;
  }
  updateName(name: string): void {
    if (this.isRecording()) this.name = name;
  }
  addEvent(name: string, time: HrTime): void {
    if (!this.isRecording()) return;
    if (this.events === NO_EVENTS) this.events = [];
    this.events.push({ name, time, droppedAttributesCount: 0 });
  }
  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.endTime = this.recorder.now();
    if (this.recording) this.recorder.processor.onEnd(this);
  }
}

/**
 * Starts spans: ids, the sampler's decision (the configured `OTEL_TRACES_SAMPLER`, called as the
 * SDK's tracer calls it), the clock; an ended span goes to the batch span processor.
 */
export class SpanRecorder {
  private readonly clock = new Clock();
  private readonly ids = new Ids();

  constructor(
    readonly processor: SpanProcessor,
    private readonly sampler: Sampler,
    readonly resource: Resource,
    readonly scope: InstrumentationScope,
  ) {}

  now(): HrTime {
    return this.clock.now();
  }

  /** The wall-clock time of a `process.hrtime.bigint()` reading. */
  at(hr: bigint): HrTime {
    return this.clock.at(hr);
  }

  /**
   * A span under the span of `parent` (the context extracted from the client's headers, one of ours
   * as `contextOf` makes it, or none). `attributes` becomes the span's own: the caller hands over a
   * fresh object.
   */
  start(name: string, kind: SpanKind, attributes: Attributes, parent: Context): SpanRecord {
    const p = trace.getSpanContext(parent);
    const valid = p !== undefined && trace.isSpanContextValid(p);
    const traceId = valid ? p.traceId : this.ids.traceId();
    const result = this.sampler.shouldSample(parent, traceId, name, kind, attributes, NO_LINKS);
    const recording = result.decision !== SamplingDecision.NOT_RECORD;
    const traceFlags = result.decision === SamplingDecision.RECORD_AND_SAMPLED ? TraceFlags.SAMPLED : TraceFlags.NONE;
    const traceState = result.traceState ?? (valid ? p.traceState : undefined);
    const spanContext: SpanContext = traceState === undefined ? { traceId, spanId: this.ids.spanId(), traceFlags } : { traceId, spanId: this.ids.spanId(), traceFlags, traceState };
    if (recording && result.attributes !== undefined) Object.assign(attributes, result.attributes);
    return new SpanRecord(this, name, kind, spanContext, valid ? p : undefined, recording ? attributes : {}, this.now(), recording);
  }

  /** The context whose span is `span`: the parent of the spans started under it. */
  contextOf(span: SpanRecord): Context {
    return trace.setSpanContext(ROOT_CONTEXT, span.spanContext());
  }
}
