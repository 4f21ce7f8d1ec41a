import axios, { AxiosInstance, isAxiosError } from 'axios';
import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import type { Readable } from 'node:stream';
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
  /** Streams get the first-token and idle timers and no decompression (compression would buffer). */
  stream: boolean;
}

export interface UpstreamResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** Milliseconds the upstream asked to wait, from `retry-after(-ms)`. */
  retryAfterMs?: number;
  /** The body as it arrives, under the idle/total timers and the size cap. Iterate it once. */
  body: AsyncIterable<Buffer>;
}

/** Thrown into the socket when connecting takes too long; mapped to a timeout UpstreamError. */
class ConnectTimeout extends Error {}

/**
 * No cap on sockets per upstream: a gateway holds one upstream connection per open client stream, and
 * a cap would queue streams behind each other (10,000 concurrent streams to one provider must open).
 */
function connectTimingAgent<T extends typeof http.Agent | typeof https.Agent>(Base: T, connectMs: number): InstanceType<T> {
  const agent = new Base({ keepAlive: true, keepAliveMsecs: 15_000, maxSockets: Infinity, maxFreeSockets: 256, scheduling: 'lifo' }) as InstanceType<T> & {
    createConnection: (...args: unknown[]) => Duplex;
  };
  const create = agent.createConnection.bind(agent);
  agent.createConnection = (...args: unknown[]) => {
    const socket = create(...args);
    const timer = setTimeout(() => socket.destroy(new ConnectTimeout(`connect took over ${connectMs} ms`)), connectMs);
    const clear = () => clearTimeout(timer);
    socket.once('connect', clear);
    socket.once('close', clear);
    return socket;
  };
  return agent;
}

/**
 * The shared upstream HTTP client (DESIGN §2: axios with keep-alive agents). It owns the four
 * timeouts of a call — connect, first token, idle between chunks, total — and the response size
 * cap, and turns every failure into an UpstreamError. A client abort (the caller's signal) becomes
 * kind `aborted`, which the routing layer never falls back on.
 */
export class UpstreamHttp {
  private readonly client: AxiosInstance;
  private readonly agents = new Map<string, { http: http.Agent; https: https.Agent }>();

  constructor() {
    this.client = axios.create({
      validateStatus: () => true,
      maxRedirects: 0,
      proxy: false,
      responseType: 'stream',
      transformRequest: [],
      transformResponse: [],
      // The size cap is enforced on the stream below; axios's own caps apply only to buffered bodies.
      maxContentLength: Infinity,
      maxBodyLength: Infinity,
    });
  }

  async send(req: UpstreamRequest): Promise<UpstreamResponse> {
    const { timeouts } = req;
    const controller = new AbortController();
    let timedOut: UpstreamError | undefined;
    const fire = (phase: 'first_token' | 'idle' | 'total', ms: number) => () => {
      timedOut = new UpstreamError('timeout', `no ${phase.replace('_', ' ')} within ${ms} ms`, { phase });
      controller.abort(timedOut);
    };
    const total = setTimeout(fire('total', timeouts.totalMs), timeouts.totalMs);
    // Non-streaming bodies arrive whole: only the total timer applies to them after connect.
    let firstToken: NodeJS.Timeout | undefined = req.stream ? setTimeout(fire('first_token', timeouts.firstTokenMs), timeouts.firstTokenMs) : undefined;
    let idle: NodeJS.Timeout | undefined;
    const onClientAbort = () => controller.abort(new UpstreamError('aborted', 'client went away'));
    if (req.signal.aborted) onClientAbort();
    req.signal.addEventListener('abort', onClientAbort, { once: true });
    const clearAll = () => {
      clearTimeout(total);
      clearTimeout(firstToken);
      clearTimeout(idle);
      req.signal.removeEventListener('abort', onClientAbort);
    };

    let stream: Readable;
    let status: number;
    let headers: UpstreamResponse['headers'];
    try {
      const agents = this.agentsFor(req.poolKey, timeouts.connectMs);
      const res = await this.client.request<Readable>({
        url: req.url,
        method: req.method ?? 'POST',
        headers: req.body === undefined ? req.headers : { 'content-type': 'application/json', ...req.headers },
        data: req.body === undefined ? undefined : JSON.stringify(req.body),
        signal: controller.signal,
        decompress: !req.stream,
        httpAgent: agents.http,
        httpsAgent: agents.https,
      });
      stream = res.data;
      status = res.status;
      headers = res.headers as UpstreamResponse['headers'];
    } catch (err) {
      clearAll();
      throw this.mapError(err, controller.signal, timedOut);
    }

    const maxBytes = req.maxBytes;
    const mapError = (err: unknown) => this.mapError(err, controller.signal, timedOut);
    const stopTimers = clearAll;
    async function* body(): AsyncGenerator<Buffer> {
      let size = 0;
      try {
        for await (const chunk of stream as AsyncIterable<Buffer>) {
          if (firstToken) {
            clearTimeout(firstToken);
            firstToken = undefined;
            if (req.stream) idle = setTimeout(fire('idle', timeouts.idleMs), timeouts.idleMs);
          } else idle?.refresh();
          size += chunk.length;
          if (size > maxBytes) throw new UpstreamError('protocol', `response larger than ${maxBytes} bytes`);
          yield chunk;
        }
        if (controller.signal.aborted) throw controller.signal.reason;
      } catch (err) {
        throw err instanceof UpstreamError ? err : mapError(err);
      } finally {
        stopTimers();
        if (!stream.destroyed) stream.destroy();
      }
    }
    return { status, headers, retryAfterMs: parseRetryAfter(headers), body: body() };
  }

  /** Reads a whole (capped) body as text. */
  static async text(body: AsyncIterable<Buffer>): Promise<string> {
    const chunks: Buffer[] = [];
    for await (const c of body) chunks.push(c);
    return Buffer.concat(chunks).toString('utf8');
  }

  destroy(): void {
    for (const a of this.agents.values()) {
      a.http.destroy();
      a.https.destroy();
    }
    this.agents.clear();
  }

  private agentsFor(poolKey: string, connectMs: number) {
    const key = `${poolKey}:${connectMs}`;
    let a = this.agents.get(key);
    if (!a) {
      a = { http: connectTimingAgent(http.Agent, connectMs), https: connectTimingAgent(https.Agent, connectMs) };
      this.agents.set(key, a);
    }
    return a;
  }

  private mapError(err: unknown, signal: AbortSignal, timedOut: UpstreamError | undefined): UpstreamError {
    if (err instanceof UpstreamError) return err;
    if (signal.aborted && signal.reason instanceof UpstreamError) return signal.reason;
    if (timedOut) return timedOut;
    const cause = isAxiosError(err) ? (err.cause ?? err) : err;
    if (cause instanceof ConnectTimeout || (cause as { cause?: unknown })?.cause instanceof ConnectTimeout) {
      return new UpstreamError('timeout', (cause as Error).message, { phase: 'connect' });
    }
    const code = (err as { code?: string }).code ?? (cause as { code?: string }).code;
    return new UpstreamError('network', code ? `${code}` : String((err as Error).message ?? err));
  }
}
