import type http from 'node:http';
import type https from 'node:https';
import type { Readable } from 'node:stream';
import zlib from 'node:zlib';
import { ownValue } from '../../common/own-key';
import { parseRetryAfter, UpstreamError } from '../upstream-error';
import type { UpstreamRequest, UpstreamResponse } from './upstream-http';

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
export class ConnectTimeout extends Error {}

type TimerPhase = 'first_token' | 'idle' | 'total';
/** How long, and how many more bytes, a stream's reader that stopped at its end marker waits for the body's end (release). */
const RELEASE_MS = 1_000;
const RELEASE_BYTES = 64 * 1024;

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
 * One upstream request of `UpstreamHttp.send`, from the request to the end of its body: the timers
 * (total; first token and idle between chunks for streams; connect is the agent's), the wiring of
 * the client's signal, the status decision, and the body reader. Its first failure (a timer or the
 * client) is the one every later error reports.
 */
export class UpstreamCall {
  /** The first reason the call ended early (a timer or the client); later errors are its echoes. */
  private failure: UpstreamError | undefined;
  /** The response started: request errors from then on reach the body reader (or nobody reads any more). */
  private responded = false;
  private total: NodeJS.Timeout | undefined;
  private firstToken: NodeJS.Timeout | undefined;
  private idle: NodeJS.Timeout | undefined;
  private outgoing!: http.ClientRequest;
  private transport!: typeof http | typeof https;
  private options!: http.RequestOptions;
  private payload: Buffer | undefined;
  /** The request was sent again on a new connection after its pooled one turned out dead (`onRequestError`). */
  private resent = false;
  private readonly onClientAbort = () => this.fail(new UpstreamError('aborted', 'client went away'));

  constructor(
    private readonly req: UpstreamRequest,
    private readonly resolve: (response: UpstreamResponse) => void,
    private readonly reject: (err: unknown) => void,
  ) {}

  /** Sends the request; the call settles through `resolve` (an answer) or `reject` (an UpstreamError). */
  start(transport: typeof http | typeof https, options: http.RequestOptions, payload: Buffer | undefined): void {
    this.transport = transport;
    this.options = options;
    this.payload = payload;
    this.send();
    this.armTimers();
    this.watchClient();
  }

  private send(): void {
    const outgoing = this.transport.request(this.options, (res) => this.onResponse(res));
    this.outgoing = outgoing;
    outgoing.on('error', (err) => {
      if (outgoing === this.outgoing) this.onRequestError(err);
    });
    outgoing.end(this.payload);
  }

  /** The total timer, and for a stream the first-token timer; a non-streaming body arrives whole, under the total timer only. */
  private armTimers(): void {
    const { totalMs, firstTokenMs } = this.req.timeouts;
    this.total = setTimeout(() => this.timedOut('total', totalMs), totalMs);
    if (this.req.stream) this.firstToken = setTimeout(() => this.timedOut('first_token', firstTokenMs), firstTokenMs);
  }

  /** A client that goes away (or already went) ends the upstream request at once. */
  private watchClient(): void {
    const { signal } = this.req;
    if (signal.aborted) this.onClientAbort();
    else signal.addEventListener('abort', this.onClientAbort, { once: true });
  }

  private timedOut(phase: TimerPhase, ms: number): void {
    this.fail(new UpstreamError('timeout', `no ${phase.replace('_', ' ')} within ${ms} ms`, { phase }));
  }

  private fail(err: UpstreamError): void {
    this.failure ??= err;
    this.outgoing.destroy(this.failure);
  }

  private clearAll(): void {
    clearTimeout(this.total);
    clearTimeout(this.firstToken);
    clearTimeout(this.idle);
    this.req.signal.removeEventListener('abort', this.onClientAbort);
  }

  private mapError(err: unknown): UpstreamError {
    if (this.failure) return this.failure;
    if (err instanceof UpstreamError) return err;
    if (err instanceof ConnectTimeout) return new UpstreamError('timeout', err.message, { phase: 'connect' });
    const code = (err as { code?: string }).code;
    return new UpstreamError('network', code ?? String((err as Error)?.message ?? err));
  }

  private onRequestError(err: Error): void {
    if (this.responded) return; // the body reader sees it (or nobody reads any more)
    if (this.deadPooledConnection(err)) {
      // The agent's other idle connections sat as long: closed too, so the re-send opens a new one.
      closeIdle(this.options.agent as http.Agent);
      this.resent = true;
      this.send();
      return;
    }
    this.responded = true;
    this.clearAll();
    this.reject(this.mapError(err));
  }

  /**
   * The request went out on a pooled connection that the upstream had closed (a reset or a broken
   * pipe before any byte of an answer): the upstream closes an idle connection on its own timer, and
   * a request that meets the close was never read, so it is sent once more on a new connection.
   * Nothing else is repeated: a reset on a new connection, or after an answer began, is the upstream's
   * failure (fallback decides).
   */
  private deadPooledConnection(err: Error): boolean {
    const code = (err as { code?: string }).code;
    return !this.resent && !this.failure && this.outgoing.reusedSocket && (code === 'ECONNRESET' || code === 'EPIPE');
  }

  /** Status and headers are in: an answer resolves with its body unread; any other status rejects with the family's error. */
  private onResponse(res: http.IncomingMessage): void {
    this.responded = true;
    const source = decodedBody(res, this.req.stream);
    const status = res.statusCode ?? 0;
    const body = this.readBody(source, res);
    if ((this.req.ok ?? is2xx)(status)) return this.resolve({ status, headers: res.headers, body, text: () => this.readText(source, res) });
    const abandon = () => {
      this.clearAll();
      this.outgoing.destroy();
      if (source !== res && !source.destroyed) source.destroy();
    };
    readErrorText(body, abandon)
      .then((text) => this.req.statusError(status, text, parseRetryAfter(res.headers)))
      .then(this.reject, this.reject);
  }

  /**
   * The body as it arrives, chunk by chunk with no buffering, under the idle/total timers and the
   * size cap; every failure leaves it as an UpstreamError, and its end (however it ends) clears the
   * timers and drops a connection that cannot go back to the pool.
   */
  private async *readBody(source: Readable, res: http.IncomingMessage): AsyncGenerator<Buffer> {
    let size = 0;
    // Whether the reader stopped pulling before the end with nothing wrong (a stream's reader stops at
    // its protocol's end marker, OpenAI's `[DONE]`, before the body's own end has been read).
    let stopped = true;
    try {
      // Not destroyed when the reader stops early: the connection may still go back to the pool (release).
      for await (const chunk of source.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
        const tooLarge = this.chunkArrived((size += chunk.length));
        if (tooLarge) throw tooLarge;
        yield chunk;
      }
      stopped = false;
      const failure = this.readFailure(res);
      if (failure) throw failure;
    } catch (err) {
      stopped = false;
      throw this.mapError(err);
    } finally {
      this.endRead(source, res, stopped);
    }
  }

  /**
   * The whole body as text, read with the stream's events: what `readBody` does for a reader of all of
   * it (the same timers, size cap, errors and end), without the two async iterators a `for await`
   * over it builds, whose promises and listeners per chunk were a whole answer's most expensive read.
   */
  private readText(source: Readable, res: http.IncomingMessage): Promise<string> {
    return new Promise<string>((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      const onData = (chunk: Buffer): void => {
        const tooLarge = this.chunkArrived((size += chunk.length));
        if (tooLarge) finish(tooLarge);
        else chunks.push(chunk);
      };
      const onEnd = (): void => finish();
      const onError = (err: unknown): void => finish(err);
      // Closed before its end with no error of its own (after the end, finish has removed this listener).
      const onClose = (): void => finish(Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }));
      const finish = (err?: unknown): void => {
        source.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
        const failure = this.readFailure(res, err);
        this.endRead(source, res, false);
        if (failure) reject(failure);
        else resolve(chunks.length === 1 ? chunks[0].toString('utf8') : Buffer.concat(chunks).toString('utf8'));
      };
      source.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose);
    });
  }

  /** A chunk arrived, `size` the body so far: the timers (onChunk), then the size cap, whose error it returns once passed. */
  private chunkArrived(size: number): UpstreamError | undefined {
    this.onChunk();
    return size > this.req.maxBytes ? new UpstreamError('protocol', `response larger than ${this.req.maxBytes} bytes`) : undefined;
  }

  /**
   * What a read that stopped reports: the error that stopped it, else the call's first failure (a
   * timer or the client), else a connection that closed before the declared end of the body; nothing
   * for a whole body.
   */
  private readFailure(res: http.IncomingMessage, err?: unknown): UpstreamError | undefined {
    if (err !== undefined) return this.mapError(err);
    if (this.failure) return this.failure;
    return res.complete ? undefined : new UpstreamError('network', 'the upstream closed the connection before the end of the body');
  }

  /**
   * However a read ended: the timers cleared; a reader that stopped early with nothing wrong lets the
   * connection go back to the pool (release), any other end short of the body's drops it.
   */
  private endRead(source: Readable, res: http.IncomingMessage, stoppedEarly: boolean): void {
    this.clearAll();
    if (stoppedEarly && source === res) this.release(res);
    else if (!res.complete || !res.readableEnded) this.outgoing.destroy();
    if (source !== res && !source.destroyed) source.destroy();
  }

  /**
   * The reader stopped before the body's end with nothing wrong: what is left is normally the end of
   * the chunked body, sent with the last event. Reading it lets the keep-alive agent take the
   * connection back, instead of every stream opening a new one (a TCP connect on the way to each
   * stream's first byte). At most RELEASE_MS and RELEASE_BYTES more; a client gone, a failure or an
   * upstream that keeps sending ends the connection as before.
   */
  private release(res: http.IncomingMessage): void {
    if (this.failure || this.req.signal.aborted || res.destroyed) {
      this.outgoing.destroy();
      return;
    }
    if (res.readableEnded) return;
    let extra = 0;
    const timer = setTimeout(() => this.outgoing.destroy(), RELEASE_MS);
    const done = () => clearTimeout(timer);
    res.on('data', (chunk: Buffer) => {
      extra += chunk.length;
      if (extra > RELEASE_BYTES) this.outgoing.destroy();
    });
    res.once('end', done);
    res.once('close', done);
    res.resume();
  }

  /** The first chunk ends the wait for the first token and, on a stream, starts the idle timer; each later one restarts it. */
  private onChunk(): void {
    if (this.firstToken) {
      clearTimeout(this.firstToken);
      this.firstToken = undefined;
      if (this.req.stream) {
        const { idleMs } = this.req.timeouts;
        this.idle = setTimeout(() => this.timedOut('idle', idleMs), idleMs);
      }
    } else this.idle?.refresh();
  }
}

/** Destroys the agent's pooled (idle) connections; those in use are left alone. */
function closeIdle(agent: http.Agent): void {
  for (const sockets of Object.values(agent.freeSockets)) for (const socket of sockets ?? []) socket.destroy();
}

/** The body as the reader sees it: decoded when a non-streaming answer came compressed (streams ask for `identity`). */
function decodedBody(res: http.IncomingMessage, stream: boolean): Readable {
  const encoding = stream ? undefined : String(res.headers['content-encoding'] ?? '').trim().toLowerCase();
  // The upstream chose the string: only the table's own entries count (`constructor` is not a decoder).
  const decode = encoding ? ownValue(DECODERS, encoding) : undefined;
  if (!decode) return res;
  const decoder = decode();
  // Errors reach the reader through its iterator; until it reads, nobody else listens.
  decoder.on('error', () => undefined);
  res.on('error', (err) => decoder.destroy(err));
  return res.pipe(decoder);
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
