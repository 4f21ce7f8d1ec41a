import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import type { ResolvedTimeouts } from '../provider-adapter';
import { UpstreamError } from '../upstream-error';
import { ConnectTimeout, UpstreamCall } from './upstream-call';

export interface UpstreamRequest {
  /** Keys the keep-alive agents: one pool per provider, so one slow upstream cannot starve another. */
  poolKey: string;
  url: string;
  method?: 'POST' | 'GET';
  headers: Record<string, string>;
  body?: unknown;
  signal: AbortSignal;
  timeouts: ResolvedTimeouts;
  maxBytes: number;
  /** Streams get the first-token and idle timers and no compression (a compressed stream would buffer). */
  stream: boolean;
  /** Whether a status is an answer (default: any 2xx); any other is an error, see `statusError`. */
  ok?: (status: number) => boolean;
  /**
   * The family's error for a status that is not an answer, from the start of its body (read as
   * `readErrorText` in upstream-call.ts says) and the `retry-after(-ms)` header; `send` rejects with it.
   */
  statusError: (status: number, bodyText: string, retryAfterMs: number | undefined) => UpstreamError;
}

/** An answer (a status the request's `ok` accepts): error statuses reject `send` instead. */
export interface UpstreamResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** The body as it arrives, under the idle/total timers and the size cap. Iterate it once. */
  body: AsyncIterable<Buffer>;
  /** Or the whole body as text, under the same timers and cap (a whole answer: no iterator). Either this or `body`, once. */
  text(): Promise<string>;
}

/**
 * How long a pooled connection may sit unused before the gateway closes it. An upstream closes idle
 * connections on its own timer (5 s for Node.js and uvicorn servers, which self-hosted models often
 * sit behind; minutes for the large providers' front ends), and a request sent on a connection in the
 * instant the upstream closes it is reset: closing first avoids that race. Shorter still when the
 * upstream announces its timer (`Keep-Alive: timeout=N`: Node.js's agent then keeps it N − 1 s).
 */
export const FREE_SOCKET_MS = 4_000;

/**
 * A keep-alive agent whose sockets time their connect phase, and re-arm TCP keep-alive only once.
 *
 * No cap on sockets per upstream: a gateway holds one upstream connection per open client stream, and
 * a cap would queue streams behind each other (10,000 concurrent streams to one provider must open).
 * Node's agent calls `setKeepAlive` (three or four `setsockopt` calls) every time a socket goes back
 * to the pool, i.e. once per request; the options never change, so the first call is kept and the
 * others are skipped (1.9 % of the gateway's CPU in the benchmark's profile).
 */
function upstreamAgent<T extends typeof http.Agent | typeof https.Agent>(Base: T, connectMs: number, freeSocketMs: number): InstanceType<T> {
  // `timeout` is the agent's idle timer of a pooled socket (it destroys a free socket that times out);
  // a request in flight turns it off on its socket (`timeout: 0` in UpstreamHttp.send): a stream's
  // pauses are the idle timer's business (upstream-call.ts).
  const agent = new Base({ keepAlive: true, keepAliveMsecs: 15_000, maxSockets: Infinity, maxFreeSockets: 256, scheduling: 'lifo', timeout: freeSocketMs }) as InstanceType<T> & {
    createConnection: (...args: unknown[]) => Duplex;
  };
  const create = agent.createConnection.bind(agent);
  agent.createConnection = (...args: unknown[]) => {
    const socket = create(...args) as Duplex & { setKeepAlive(enable?: boolean, delay?: number): unknown };
    const timer = setTimeout(() => socket.destroy(new ConnectTimeout(`connect took over ${connectMs} ms`)), connectMs);
    const clear = () => clearTimeout(timer);
    socket.once('connect', clear);
    socket.once('secureConnect', clear);
    socket.once('close', clear);
    const setKeepAlive = socket.setKeepAlive;
    let armed = false;
    socket.setKeepAlive = function (this: typeof socket, enable?: boolean, delay?: number) {
      if (armed && enable) return this;
      armed = Boolean(enable);
      return setKeepAlive.call(this, enable, delay);
    };
    return socket;
  };
  return agent;
}

/** Parsed URLs of the upstream endpoints (a handful per provider, reused on every call). */
interface Endpoint {
  transport: typeof http | typeof https;
  hostname: string;
  port: string;
  path: string;
  /** `user:password` from the URL, sent as basic auth. */
  auth?: string;
}

/**
 * The shared upstream HTTP client, keep-alive agents on `node:http` / `node:https` directly, not
 * axios (docs/architecture.md "Upstream HTTP on node:http"): on this project's benchmark axios cost ≈ 300 µs of CPU per call over the same request made with `http.request` (config
 * merging, header objects, its stream plumbing), twice the whole per-request budget (README
 * "Benchmarks").
 *
 * It owns the four timeouts of a call — connect (on the socket), first token and idle between
 * chunks (streams), total — and the response size cap, and turns every failure into an
 * UpstreamError; an error status becomes the family's `statusError`, so adapters only see answers.
 * A client abort (the caller's signal) becomes kind `aborted`, which the routing layer never falls
 * back on. Non-streaming answers may come compressed (gzip, deflate, br) and are decoded; streams
 * ask for `identity`. The client keeps what calls share (agents, parsed endpoints); each request is
 * one UpstreamCall (upstream-call.ts), which holds that request's timers and body.
 */
export class UpstreamHttp {
  private readonly agents = new Map<string, { http: http.Agent; https: https.Agent }>();
  private readonly endpoints = new Map<string, Endpoint>();

  /** `freeSocketMs`: how long a pooled connection may sit unused (FREE_SOCKET_MS; tests shorten it). */
  constructor(private readonly freeSocketMs = FREE_SOCKET_MS) {}

  send(req: UpstreamRequest): Promise<UpstreamResponse> {
    let endpoint: Endpoint;
    try {
      endpoint = this.endpoint(req.url);
    } catch {
      return Promise.reject(new UpstreamError('network', 'invalid upstream URL'));
    }
    const agents = this.agentsFor(req.poolKey, req.timeouts.connectMs);
    const payload = req.body === undefined ? undefined : Buffer.from(JSON.stringify(req.body), 'utf8');
    const options: http.RequestOptions = {
      hostname: endpoint.hostname,
      port: endpoint.port,
      path: endpoint.path,
      method: req.method ?? 'POST',
      headers: requestHeaders(req, payload),
      auth: endpoint.auth,
      agent: endpoint.transport === https ? agents.https : agents.http,
      // The agent's idle timer is for pooled sockets only (upstreamAgent).
      timeout: 0,
    };
    return new Promise<UpstreamResponse>((resolve, reject) => new UpstreamCall(req, resolve, reject).start(endpoint.transport, options, payload));
  }

  destroy(): void {
    for (const a of this.agents.values()) {
      a.http.destroy();
      a.https.destroy();
    }
    this.agents.clear();
  }

  private endpoint(url: string): Endpoint {
    let e = this.endpoints.get(url);
    if (e) return e;
    const u = new URL(url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('unsupported protocol');
    const secure = u.protocol === 'https:';
    e = {
      transport: secure ? https : http,
      hostname: u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname,
      port: u.port || (secure ? '443' : '80'),
      path: `${u.pathname}${u.search}`,
      auth: u.username ? `${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}` : undefined,
    };
    // Endpoint URLs come from the configuration (a few per provider); the bound only guards against
    // a family whose URL carries per-request parts.
    if (this.endpoints.size >= 1024) this.endpoints.clear();
    this.endpoints.set(url, e);
    return e;
  }

  private agentsFor(poolKey: string, connectMs: number) {
    const key = `${poolKey}:${connectMs}`;
    let a = this.agents.get(key);
    if (!a) {
      a = { http: upstreamAgent(http.Agent, connectMs, this.freeSocketMs), https: upstreamAgent(https.Agent, connectMs, this.freeSocketMs) };
      this.agents.set(key, a);
    }
    return a;
  }
}

/** The request's headers plus the body's type and length, and the encodings it accepts unless the family set them. */
function requestHeaders(req: UpstreamRequest, payload: Buffer | undefined): Record<string, string | number> {
  const headers: Record<string, string | number> = payload === undefined ? { ...req.headers } : { 'content-type': 'application/json', ...req.headers };
  if (payload !== undefined) headers['content-length'] = payload.length;
  if (!hasHeader(headers, 'accept-encoding')) headers['accept-encoding'] = req.stream ? 'identity' : 'gzip, deflate, br';
  return headers;
}

function hasHeader(headers: Record<string, unknown>, name: string): boolean {
  for (const k of Object.keys(headers)) if (k.toLowerCase() === name) return true;
  return false;
}
