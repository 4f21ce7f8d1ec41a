import { Context, SpanKind, SpanStatusCode, TraceFlags } from '@opentelemetry/api';
import type { TargetRef } from '../config/gateway-config';
import type { UpstreamTarget } from '../providers/provider-adapter';
import type { DecisionTrace } from '../traces/decision-trace';
import { ATTR, decisionAttributes, FIRST_TOKEN_EVENT, GenAiRequest, operationOf, paramAttributes, providerNameOf } from './gen-ai';
import type { SpanRecord, SpanRecorder } from './span-record';
import type { TraceHeaders } from './trace-context';

/**
 * One request's place in a distributed trace (docs/architecture.md "OpenTelemetry traces"), kept
 * on the request's facts. With tracing on it is the request's server span; with tracing off it
 * exists only when the client sent a `traceparent`, which it passes on to the upstream unchanged.
 * Without either there is none, and the hot path does nothing for telemetry.
 */
export interface RequestTelemetry {
  /** An upstream call is about to be made (the dispatcher, once per attempt). */
  upstreamCall(target: TargetRef, upstream: UpstreamTarget, attempt: number): UpstreamCall;
  /**
   * The request's decision trace was built (src/traces/decision-trace.builder.ts): the span takes
   * its fields from it. `started` is the trace's own start, which its `ttftMs` counts from.
   */
  decided(t: DecisionTrace, served: UpstreamTarget | undefined, req: GenAiRequest, started: bigint): void;
  /** The response finished, or its connection closed first. */
  responded(status: number, method: string, route: string): void;
}

/** One upstream call: the trace headers it carries, and how it ended. */
export interface UpstreamCall {
  readonly headers: TraceHeaders;
  /** The call answered (a stream: its first output); its span stays open until the decision records how the answer ended. */
  succeeded(): void;
  /** The call ended in a failure: an upstream error kind, its status, or `aborted`. Never any upstream text. */
  failed(errorType: string): void;
}

/** Tracing off, and the client sent a well-formed `traceparent`: passed on as it came. */
export class PassThroughTelemetry implements RequestTelemetry, UpstreamCall {
  constructor(readonly headers: TraceHeaders) {}
  upstreamCall(): UpstreamCall {
    return this;
  }
  succeeded(): void {}
  failed(): void {}
  decided(): void {}
  responded(): void {}
}

/** The W3C headers carrying a span's context to the next hop. */
function headersOf(span: SpanRecord): TraceHeaders {
  const sc = span.spanContext();
  const traceparent = `00-${sc.traceId}-${sc.spanId}-${sc.traceFlags & TraceFlags.SAMPLED ? '01' : '00'}`;
  const state = sc.traceState?.serialize();
  return state ? { traceparent, tracestate: state } : { traceparent };
}

class AttemptSpan implements UpstreamCall {
  readonly headers: TraceHeaders;
  constructor(
    readonly span: SpanRecord,
    private readonly owner: RequestSpan,
  ) {
    this.headers = headersOf(span);
  }

  succeeded(): void {
    this.owner.servedBy(this.span);
  }

  failed(errorType: string): void {
    this.span.setAttribute(ATTR.errorType, errorType);
    this.span.setStatus({ code: SpanStatusCode.ERROR });
    this.span.end();
  }
}

/**
 * The request's SERVER span and its CLIENT spans, one per upstream call. The span ends when the
 * response has ended and, for a request that reached dispatch, its decision trace was built (a
 * stream's trace is built when its consumer stops, which may be after the client left).
 */
export class RequestSpan implements RequestTelemetry {
  private parent?: Context;
  private served?: SpanRecord;
  private attempted = false;
  private decision = false;
  private ended = false;
  private response?: { status: number; method: string; route: string };
  private genAiName?: string;

  constructor(
    private readonly recorder: SpanRecorder,
    private readonly span: SpanRecord,
    /** The operation of this endpoint's upstream calls, known from the path before the body is read. */
    private readonly operation: string,
  ) {}

  upstreamCall(target: TargetRef, upstream: UpstreamTarget, attempt: number): UpstreamCall {
    this.attempted = true;
    const span = this.recorder.start(
      `${this.operation} ${upstream.upstream}`,
      SpanKind.CLIENT,
      {
        [ATTR.operation]: this.operation,
        [ATTR.provider]: providerNameOf(upstream.provider.family),
        [ATTR.requestModel]: upstream.upstream,
        [ATTR.gwProvider]: target.provider,
        [ATTR.gwModel]: target.model,
        [ATTR.attempt]: attempt,
      },
      (this.parent ??= this.recorder.contextOf(this.span)),
    );
    return new AttemptSpan(span, this);
  }

  servedBy(span: SpanRecord): void {
    this.served = span;
  }

  decided(t: DecisionTrace, served: UpstreamTarget | undefined, req: GenAiRequest, started: bigint): void {
    if (this.decision || this.ended) return;
    this.decision = true;
    const a = this.span.attributesToSet();
    if (a !== undefined) {
      decisionAttributes(a, t);
      if (served) {
        a[ATTR.provider] = providerNameOf(served.provider.family);
        a[ATTR.responseModel] = served.upstream;
      }
      paramAttributes(a, req);
      if (req.confidence != null) a[ATTR.confidence] = req.confidence;
      this.genAiName = `${operationOf(t.endpoint)} ${t.requestedModel}`;
      if (t.ttftMs !== null) this.span.addEvent(FIRST_TOKEN_EVENT, this.recorder.at(started + BigInt(Math.round(t.ttftMs * 1e6))));
    }
    const s = this.served;
    if (s) {
      // After its first output the call can still end badly: broken mid-stream, or the client left.
      // Its tokens are on the request's span only, so a backend summing gen_ai.usage over a trace counts them once.
      if (t.errorCode !== null && s.isRecording()) {
        s.setAttribute(ATTR.errorType, t.errorCode);
        s.setStatus({ code: SpanStatusCode.ERROR });
      }
      s.end();
    }
    if (this.response) this.end();
  }

  responded(status: number, method: string, route: string): void {
    if (this.response) return;
    this.response = { status, method, route };
    if (this.attempted && !this.decision) return;
    this.end();
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    const r = this.response!;
    if (this.span.isRecording()) {
      this.span.updateName(this.genAiName ?? `${r.method} ${r.route}`);
      this.span.setAttribute(ATTR.httpRoute, r.route);
      this.span.setAttribute(ATTR.httpStatus, r.status);
      // HTTP server spans are errors for 5xx only: a 4xx is the client's (docs/api.md "Errors").
      if (r.status >= 500) this.span.setStatus({ code: SpanStatusCode.ERROR });
    }
    this.span.end();
  }
}
