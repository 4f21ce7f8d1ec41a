import http from 'node:http';
import https from 'node:https';
import type { Duplex, Readable } from 'node:stream';
import zlib from 'node:zlib';
import type { ResolvedTimeouts } from '../provider-adapter';
import { parseRetryAfter, UpstreamError } from '../upstream-error';

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
   * `readErrorText` says) and the `retry-after(-ms)` header; `send` rejects with it.
   */
  statusError: (status: number, bodyText: string, retryAfterMs: number | undefined) => UpstreamError;
}

/** An answer (a status the request's `ok` accepts): error statuses reject `send` instead. */
export interface UpstreamResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** The body as it arrives, under the idle/total timers and the size cap. Iterate it once. */
  body: AsyncIterable<Buffer>;
}

/**
 * How much of an error status's body `readErrorText` reads. Adapters keep about 500 characters of
 * it for the log line; the rest of a multi-MiB error page is never buffered.
 */
export const ERROR_BODY_MAX_BYTES = 64 * 1024;

/**
 * How long `readErrorText` waits for an error status's body. The status alone decides fallback
 * (docs/api.md "Fallback"), so a body that stalls or drips must not hold the next target back
 * for the total timeout (600 s by default, the only timer on a non-streaming body).
 */
export const ERROR_BODY_MAX_MS = 2_000;

/** Thrown into the socket when connecting takes too long; mapped to a timeout UpstreamError. */
class ConnectTimeout extends Error {}

/**
 * A keep-alive agent whose sockets time their connect phase, and re-arm TCP keep-alive only once.
 *
 * No cap on sockets per upstream: a gateway holds one upstream connection per open client stream, and
 * a cap would queue streams behind each other (10,000 concurrent streams to one provider must open).
 * Node's agent calls `setKeepAlive` (three or four `setsockopt` calls) every time a socket goes back
 * to the pool, i.e. once per request; the options never change, so the first call is kept and the
 * others are skipped (1.9 % of the gateway's CPU in the benchmark's profile).
 */
function upstreamAgent<T extends typeof http.Agent | typeof https.Agent>(Base: T, connectMs: number): InstanceType<T> {
  const agent = new Base({ keepAlive: true, keepAliveMsecs: 15_000, maxSockets: Infinity, maxFreeSockets: 256, scheduling: 'lifo' }) as InstanceType<T> & {
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

const ZLIB_SYNC = { flush: zlib.constants.Z_SYNC_FLUSH, finishFlush: zlib.constants.Z_SYNC_FLUSH };
const BROTLI_SYNC = { flush: zlib.constants.BROTLI_OPERATION_FLUSH, finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH };
const DECODERS: Record<string, () => zlib.Gunzip | zlib.Inflate | zlib.BrotliDecompress> = {
  gzip: () => zlib.createGunzip(ZLIB_SYNC),
  'x-gzip': () => zlib.createGunzip(ZLIB_SYNC),
  deflate: () => zlib.createInflate(ZLIB_SYNC),
  br: () => zlib.createBrotliDecompress(BROTLI_SYNC),
};

const is2xx = (status: number) => status >= 200 && status < 300;

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
 * ask for `identity`.
 */
export class UpstreamHttp {
  private readonly agents = new Map<string, { http: http.Agent; https: https.Agent }>();
  private readonly endpoints = new Map<string, Endpoint>();

  send(req: UpstreamRequest): Promise<UpstreamResponse> {
    const { timeouts } = req;
    let endpoint: Endpoint;
    try {
      endpoint = this.endpoint(req.url);
    } catch {
      return Promise.reject(new UpstreamError('network', 'invalid upstream URL'));
    }
    const agents = this.agentsFor(req.poolKey, timeouts.connectMs);
    const payload = req.body === undefined ? undefined : Buffer.from(JSON.stringify(req.body), 'utf8');
    const headers: Record<string, string | number> = payload === undefined ? { ...req.headers } : { 'content-type': 'application/json', ...req.headers };
    if (payload !== undefined) headers['content-length'] = payload.length;
    if (!hasHeader(headers, 'accept-encoding')) headers['accept-encoding'] = req.stream ? 'identity' : 'gzip, deflate, br';

    return new Promise<UpstreamResponse>((resolve, reject) => {
      /** The first reason the call ended early (a timer or the client); later errors are its echoes. */
      let failure: UpstreamError | undefined;
      let settled = false;
      let total: NodeJS.Timeout | undefined;
      let firstToken: NodeJS.Timeout | undefined;
      let idle: NodeJS.Timeout | undefined;
      const clearAll = () => {
        clearTimeout(total);
        clearTimeout(firstToken);
        clearTimeout(idle);
        req.signal.removeEventListener('abort', onClientAbort);
      };
      const fail = (err: UpstreamError) => {
        failure ??= err;
        outgoing.destroy(failure);
      };
      const timeout = (phase: 'first_token' | 'idle' | 'total', ms: number) => () => fail(new UpstreamError('timeout', `no ${phase.replace('_', ' ')} within ${ms} ms`, { phase }));
      const onClientAbort = () => fail(new UpstreamError('aborted', 'client went away'));
      const mapError = (err: unknown): UpstreamError => {
        if (failure) return failure;
        if (err instanceof UpstreamError) return err;
        if (err instanceof ConnectTimeout) return new UpstreamError('timeout', err.message, { phase: 'connect' });
        const code = (err as { code?: string }).code;
        return new UpstreamError('network', code ?? String((err as Error)?.message ?? err));
      };

      const outgoing = endpoint.transport.request(
        {
          hostname: endpoint.hostname,
          port: endpoint.port,
          path: endpoint.path,
          method: req.method ?? 'POST',
          headers,
          auth: endpoint.auth,
          agent: endpoint.transport === https ? agents.https : agents.http,
        },
        (res) => {
          settled = true;
          const encoding = req.stream ? undefined : String(res.headers['content-encoding'] ?? '').trim().toLowerCase();
          const decode = encoding ? DECODERS[encoding] : undefined;
          let source: Readable = res;
          if (decode) {
            const decoder = decode();
            // Errors reach the reader through its iterator; until it reads, nobody else listens.
            decoder.on('error', () => undefined);
            res.on('error', (err) => decoder.destroy(err));
            source = res.pipe(decoder);
          }
          const status = res.statusCode ?? 0;
          const body = readBody(source, res);
          if ((req.ok ?? is2xx)(status)) return resolve({ status, headers: res.headers, body });
          const abandon = () => {
            clearAll();
            outgoing.destroy();
            if (source !== res && !source.destroyed) source.destroy();
          };
          readErrorText(body, abandon)
            .then((text) => req.statusError(status, text, parseRetryAfter(res.headers)))
            .then(reject, reject);
        },
      );

      async function* readBody(source: Readable, res: http.IncomingMessage): AsyncGenerator<Buffer> {
        let size = 0;
        try {
          for await (const chunk of source as AsyncIterable<Buffer>) {
            if (firstToken) {
              clearTimeout(firstToken);
              firstToken = undefined;
              if (req.stream) idle = setTimeout(timeout('idle', timeouts.idleMs), timeouts.idleMs);
            } else idle?.refresh();
            size += chunk.length;
            if (size > req.maxBytes) throw new UpstreamError('protocol', `response larger than ${req.maxBytes} bytes`);
            yield chunk;
          }
          if (failure) throw failure;
          // A connection that closed before the declared end of the body.
          if (!res.complete) throw new UpstreamError('network', 'the upstream closed the connection before the end of the body');
        } catch (err) {
          throw mapError(err);
        } finally {
          clearAll();
          if (!res.complete || !res.readableEnded) outgoing.destroy();
          if (source !== res && !source.destroyed) source.destroy();
        }
      }

      outgoing.on('error', (err) => {
        if (settled) return; // after the response started, readBody sees the error (or nobody reads any more)
        settled = true;
        clearAll();
        reject(mapError(err));
      });

      total = setTimeout(timeout('total', timeouts.totalMs), timeouts.totalMs);
      // Non-streaming bodies arrive whole: only the total timer applies to them after connect.
      if (req.stream) firstToken = setTimeout(timeout('first_token', timeouts.firstTokenMs), timeouts.firstTokenMs);
      if (req.signal.aborted) onClientAbort();
      else req.signal.addEventListener('abort', onClientAbort, { once: true });
      outgoing.end(payload);
    });
  }

  /** Reads a whole (capped) body as text. */
  static async text(body: AsyncIterable<Buffer>): Promise<string> {
    const chunks: Buffer[] = [];
    for await (const c of body) chunks.push(c);
    return chunks.length === 1 ? chunks[0].toString('utf8') : Buffer.concat(chunks).toString('utf8');
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
      a = { http: upstreamAgent(http.Agent, connectMs), https: upstreamAgent(https.Agent, connectMs) };
      this.agents.set(key, a);
    }
    return a;
  }
}

function hasHeader(headers: Record<string, unknown>, name: string): boolean {
  for (const k of Object.keys(headers)) if (k.toLowerCase() === name) return true;
  return false;
}

/**
 * Reads the start of an error status's body, for the status error's detail (logs only): at most
 * ERROR_BODY_MAX_BYTES, for at most ERROR_BODY_MAX_MS, then `abandon` drops the connection (a pending
 * read then ends) and what arrived is returned. The status is what counts (fallback triggers, the
 * client's error), so a body that cannot be read (cut mid-body, over the size cap, a timer) gives ''
 * instead of turning the status error into a network or protocol one. A client abort while reading
 * stays an abort: nothing is tried after it.
 */
async function readErrorText(body: AsyncIterable<Buffer>, abandon: () => void): Promise<string> {
  const it = body[Symbol.asyncIterator]();
  const chunks: Buffer[] = [];
  let size = 0;
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<'expired'>((resolve) => (timer = setTimeout(() => resolve('expired'), ERROR_BODY_MAX_MS)));
  try {
    for (;;) {
      // A read that loses to the timer settles once the connection is dropped; the race handles it.
      const r = await Promise.race([it.next(), expired]);
      if (r !== 'expired' && r.done) break;
      if (r !== 'expired') {
        chunks.push(r.value);
        size += r.value.length;
      }
      if (r === 'expired' || size >= ERROR_BODY_MAX_BYTES) {
        // The rest is not wanted: drop the connection rather than keep it to drain the body.
        abandon();
        it.return?.().catch(() => undefined);
        break;
      }
    }
  } catch (err) {
    if (err instanceof UpstreamError && err.kind === 'aborted') throw err;
    return '';
  } finally {
    clearTimeout(timer);
  }
  return Buffer.concat(chunks).subarray(0, ERROR_BODY_MAX_BYTES).toString('utf8');
}
