import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';

type PbValue = bigint | Buffer;
/** The fields of one protobuf message: the reader the bench's OTLP sink counts spans with too. */
const { protobufFields: pbFields } = require('../../bench/lib/otlp-protobuf') as { protobufFields(buf: Buffer): Map<number, PbValue[]> };

/** One exported span, decoded from OTLP (protobuf or JSON): ids in hex, attributes as plain values. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  /** OTLP span kind: 2 server, 3 client. */
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, unknown>;
  events: Array<{ name: string; timeNs: bigint; attributes: Record<string, unknown> }>;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  status: number;
  resource: Record<string, unknown>;
}

/** `ok`: 200 for every export; `failing`: 503; `frozen`: the request is read and never answered. */
export type ReceiverMode = 'ok' | 'failing' | 'frozen';

interface OtlpValue {
  stringValue?: string;
  intValue?: number | string;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: OtlpValue[] };
}
type OtlpAttributes = Array<{ key: string; value: OtlpValue }> | undefined;

function valueOf(v: OtlpValue): unknown {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map(valueOf);
  return undefined;
}

function attributesOf(list: OtlpAttributes): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const a of list ?? []) out[a.key] = valueOf(a.value);
  return out;
}

const pbAll = (f: Map<number, PbValue[]>, no: number): Buffer[] => (f.get(no) ?? []) as Buffer[];
const pbOne = (f: Map<number, PbValue[]>, no: number): PbValue | undefined => f.get(no)?.at(-1);

/** common.v1.AnyValue: 1 string, 2 bool, 3 int64, 4 double, 5 ArrayValue (1: values). */
function pbAnyValue(buf: Buffer): unknown {
  const f = pbFields(buf);
  if (f.has(1)) return (pbOne(f, 1) as Buffer).toString('utf8');
  if (f.has(2)) return pbOne(f, 2) !== 0n;
  if (f.has(3)) return Number(BigInt.asIntN(64, pbOne(f, 3) as bigint));
  if (f.has(4)) return (pbOne(f, 4) as Buffer).readDoubleLE(0);
  if (f.has(5)) return pbAll(pbFields(pbOne(f, 5) as Buffer), 1).map(pbAnyValue);
  return undefined;
}

/** repeated common.v1.KeyValue (1 key, 2 value). */
function pbAttributes(list: Buffer[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const kv of list) {
    const f = pbFields(kv);
    const value = pbOne(f, 2);
    out[(pbOne(f, 1) as Buffer).toString('utf8')] = value === undefined ? undefined : pbAnyValue(value as Buffer);
  }
  return out;
}

/**
 * ExportTraceServiceRequest (1 ResourceSpans) → ResourceSpans (1 Resource, 2 ScopeSpans) →
 * ScopeSpans (2 Span); Span: 1 trace_id, 2 span_id, 4 parent_span_id, 5 name, 6 kind, 7/8 start and
 * end (fixed64 ns), 9 attributes, 11 events (1 time, 2 name, 3 attributes), 15 status (3 code).
 */
function decodeProtobuf(body: Buffer): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const rs of pbAll(pbFields(body), 1)) {
    const rsf = pbFields(rs);
    const res = pbOne(rsf, 1) as Buffer | undefined;
    const resource = res ? pbAttributes(pbAll(pbFields(res), 1)) : {};
    for (const ss of pbAll(rsf, 2)) {
      for (const raw of pbAll(pbFields(ss), 2)) {
        const s = pbFields(raw);
        const parent = pbOne(s, 4) as Buffer | undefined;
        const status = pbOne(s, 15) as Buffer | undefined;
        spans.push({
          traceId: (pbOne(s, 1) as Buffer).toString('hex'),
          spanId: (pbOne(s, 2) as Buffer).toString('hex'),
          parentSpanId: parent && parent.length > 0 ? parent.toString('hex') : undefined,
          name: (pbOne(s, 5) as Buffer | undefined)?.toString('utf8') ?? '',
          kind: Number(pbOne(s, 6) ?? 0n),
          startNs: (pbOne(s, 7) as Buffer).readBigUInt64LE(0),
          endNs: (pbOne(s, 8) as Buffer).readBigUInt64LE(0),
          attributes: pbAttributes(pbAll(s, 9)),
          events: pbAll(s, 11).map((raw) => {
            const e = pbFields(raw);
            return { name: (pbOne(e, 2) as Buffer).toString('utf8'), timeNs: (pbOne(e, 1) as Buffer).readBigUInt64LE(0), attributes: pbAttributes(pbAll(e, 3)) };
          }),
          status: status ? Number(pbOne(pbFields(status), 3) ?? 0n) : 0,
          resource,
        });
      }
    }
  }
  return spans;
}

/** OTLP/JSON: ids in hex, 64-bit integers as strings. */
function decodeJson(text: string): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  const body = JSON.parse(text) as {
    resourceSpans?: Array<{ resource?: { attributes?: OtlpAttributes }; scopeSpans?: Array<{ spans?: any[] }> }>;
  };
  for (const rs of body.resourceSpans ?? []) {
    const resource = attributesOf(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        spans.push({
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId || undefined,
          name: s.name,
          kind: s.kind,
          startNs: BigInt(s.startTimeUnixNano),
          endNs: BigInt(s.endTimeUnixNano),
          attributes: attributesOf(s.attributes),
          events: (s.events ?? []).map((e: any) => ({ name: e.name, timeNs: BigInt(e.timeUnixNano), attributes: attributesOf(e.attributes) })),
          status: s.status?.code ?? 0,
          resource,
        });
      }
    }
  }
  return spans;
}

/**
 * A collector's OTLP/HTTP traces receiver on 127.0.0.1, decoding either encoding (by the request's
 * content type: protobuf is the gateway's default, JSON on request). Keeps every request's raw body (to search for text that must never be exported) and its
 * headers; in `frozen` mode it holds requests open without answering, as a hung collector does.
 */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  readonly bodies: string[] = [];
  readonly headers: http.IncomingHttpHeaders[] = [];
  /** Export requests received (answered or not). */
  requests = 0;
  mode: ReceiverMode = 'ok';
  url = '';
  private server?: http.Server;
  private readonly held = new Set<http.ServerResponse>();

  async start(mode: ReceiverMode = 'ok'): Promise<this> {
    this.mode = mode;
    this.server = http.createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    for (const res of this.held) res.destroy();
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  /** Waits until `pick` finds what it looks for in the spans received so far (polling; the gateway exports in batches). */
  async waitFor<T>(pick: (spans: ReceivedSpan[]) => T | undefined | false, timeoutMs = 5_000): Promise<T> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const found = pick(this.spans);
      if (found) return found;
      if (Date.now() > until) throw new Error(`no such spans within ${timeoutMs} ms; received: ${this.spans.map((s) => s.name).join(', ') || 'none'}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** The spans of one trace. */
  trace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((s) => s.traceId === traceId);
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    this.requests++;
    if (this.mode === 'frozen') {
      this.held.add(res);
      res.on('close', () => this.held.delete(res));
      return;
    }
    if (this.mode === 'failing') {
      res.writeHead(503, { 'content-type': 'application/json' }).end('{}');
      return;
    }
    let raw = Buffer.concat(chunks);
    if (req.headers['content-encoding'] === 'gzip') raw = gunzipSync(raw);
    const text = raw.toString('utf8');
    this.bodies.push(text);
    this.headers.push(req.headers);
    const type = String(req.headers['content-type']);
    if (req.url !== '/v1/traces' || !(type.startsWith('application/x-protobuf') || type.startsWith('application/json'))) {
      res.writeHead(415).end();
      return;
    }
    const json = type.startsWith('application/json');
    this.spans.push(...(json ? decodeJson(text) : decodeProtobuf(raw)));
    // A collector answers in the request's encoding: an empty ExportTraceServiceResponse.
    if (json) res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    else res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
  }
}
