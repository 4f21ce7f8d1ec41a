import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';

/** One exported span, decoded from OTLP/JSON: ids in hex, attributes as plain values. */
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

/**
 * A collector's OTLP/HTTP traces receiver on 127.0.0.1, decoding the JSON encoding the gateway
 * sends. Keeps every request's raw body (to search for text that must never be exported) and its
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
    if (req.url !== '/v1/traces' || !String(req.headers['content-type']).startsWith('application/json')) {
      res.writeHead(415).end();
      return;
    }
    const body = JSON.parse(text) as {
      resourceSpans?: Array<{ resource?: { attributes?: OtlpAttributes }; scopeSpans?: Array<{ spans?: any[] }> }>;
    };
    for (const rs of body.resourceSpans ?? []) {
      const resource = attributesOf(rs.resource?.attributes);
      for (const ss of rs.scopeSpans ?? []) {
        for (const s of ss.spans ?? []) {
          this.spans.push({
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
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  }
}
