/**
 * The W3C Trace Context headers an upstream call carries (docs/architecture.md "OpenTelemetry
 * traces"): with tracing on, the context of the call's own span; with it off, the client's headers
 * passed through unchanged, so a trace still runs from the application to the provider.
 */
export interface TraceHeaders {
  readonly traceparent: string;
  readonly tracestate?: string;
}

/** Version 00 and any later version's first four fields; all-zero ids are invalid (W3C Trace Context, "traceparent"). */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
/** The specification's limit on what a vendor must propagate. */
const MAX_TRACESTATE = 512;

/** The client's trace headers when its `traceparent` is well-formed, else undefined (a malformed one is not passed on). */
export function clientTraceHeaders(traceparent: string | string[] | undefined, tracestate: string | string[] | undefined): TraceHeaders | undefined {
  if (typeof traceparent !== 'string') return undefined;
  const m = TRACEPARENT.exec(traceparent.trim());
  if (!m || m[1] === 'ff' || (m[1] === '00' && m[5] !== undefined) || /^0+$/.test(m[2]) || /^0+$/.test(m[3])) return undefined;
  // Several tracestate headers are one list (RFC 9110 field lines), joined by commas.
  const state = Array.isArray(tracestate) ? tracestate.join(',') : tracestate;
  return state && state.length <= MAX_TRACESTATE ? { traceparent: m[0], tracestate: state } : { traceparent: m[0] };
}

/** The upstream request's headers with the trace headers added (the adapters' header building). */
export function withTraceHeaders(headers: Record<string, string>, trace: TraceHeaders | undefined): Record<string, string> {
  if (trace === undefined) return headers;
  headers.traceparent = trace.traceparent;
  if (trace.tracestate !== undefined) headers.tracestate = trace.tracestate;
  return headers;
}
