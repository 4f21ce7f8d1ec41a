import { once } from 'node:events';
import type { Response } from 'express';
import type { ErrorCode } from '../errors/error-catalogue';
import { GatewayError } from '../errors/gateway-error';
import type { Caller, GatewayRequest, RequestFacts } from './request-context';
import { clientGoneSignal, sendJson, setServedHeaders } from './served-headers';

/**
 * What a service needs of an HTTP request, so that services never hold Express's `req`/`res`: who
 * is calling, the facts for the access log, the raw session header (parsed by the service, after the
 * body, so a bad body is reported first), and a signal aborted when the client goes away before the
 * answer finished (every upstream call takes it, so a disconnect stops the upstream at once).
 */
export interface RequestScope {
  caller: Caller;
  facts: RequestFacts;
  sessionHeader: string | string[] | undefined;
  signal: AbortSignal;
}

export function requestScope(req: GatewayRequest, res: Response): RequestScope {
  return { caller: req.caller!, facts: req.facts, sessionHeader: req.headers['gateway-session-id'], signal: clientGoneSignal(res) };
}

/** The (provider, catalogue model) pair that served, and whether a target before it was unavailable. */
export interface Served {
  target: { provider: string; model: string };
  fallbackUsed: boolean;
}

/** A 200 JSON answer with the served headers and any extra headers (usage-derived `Gateway-*`). */
export function respondJson(req: GatewayRequest, res: Response, served: Served, headers: Record<string, string>, body: unknown): void {
  setServedHeaders(req, res, served.target, served.fallbackUsed);
  for (const k in headers) res.setHeader(k, headers[k]);
  sendJson(res, 200, body);
}

/**
 * A stream that broke after its first byte: there is no fallback any more and no status to send,
 * so the encoder of the endpoint writes its own error event and the stream closes unfinished.
 */
export class StreamBrokenError extends GatewayError {
  constructor(code: Extract<ErrorCode, 'upstream_timeout' | 'upstream_error'>) {
    super(code, 'The upstream provider failed mid-stream.');
  }
}

/** The client went away while the stream was being written: nothing more can be sent. */
export class ClientLeftError extends Error {
  constructor() {
    super('client went away');
  }
}

/** One wire format's SSE rendering of a stream of events (chat completions chunks, Responses events). */
export interface SseEncoder<E> {
  /** The SSE text for one event; undefined when the event writes nothing (it may still be kept, e.g. usage). */
  event(e: E): string | undefined;
  /** The closing SSE text of a stream that ended whole. */
  end(): string;
  /** The closing SSE text of a stream that broke after its first byte. */
  failed(err: StreamBrokenError): string;
  /** HTTP trailers of a stream that ended whole (declared up front in `Trailer`). */
  trailers(): Record<string, string>;
}

/**
 * Writes a stream as SSE: the served headers, then each event as the encoder renders it, waiting for
 * `drain` when the socket is full (back-pressure reaches the upstream through the event source),
 * then the encoder's end and the trailers. A StreamBrokenError from the source becomes the encoder's
 * error event and the stream closes without its normal end, so no client takes a cut answer for a
 * whole one. A client that leaves stops the iteration (the source sees it via the abort signal).
 */
export async function respondSse<E>(
  req: GatewayRequest,
  res: Response,
  served: Served,
  events: AsyncIterable<E>,
  enc: SseEncoder<E>,
  trailerNames: readonly string[],
  signal: AbortSignal,
): Promise<void> {
  setServedHeaders(req, res, served.target, served.fallbackUsed);
  res.status(200);
  res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
  res.setHeader('Cache-Control', 'no-cache');
  res.setHeader('X-Accel-Buffering', 'no');
  res.setHeader('Trailer', trailerNames.join(', '));
  req.socket.setNoDelay(true);
  try {
    for await (const e of events) {
      const payload = enc.event(e);
      if (payload === undefined) {
        if (!res.headersSent) res.flushHeaders();
        continue;
      }
      // The headers leave with the first event, in one write (the stream is held until its first
      // output, so that event is at hand): flushing them alone first cost a socket write of its own.
      if (!res.write(payload)) await Promise.race([once(res, 'drain'), once(res, 'close')]);
      if (signal.aborted) throw new ClientLeftError();
    }
  } catch (err) {
    if (err instanceof ClientLeftError || signal.aborted) return;
    if (!(err instanceof StreamBrokenError)) throw err;
    res.write(enc.failed(err));
    res.end();
    return;
  }
  res.write(enc.end());
  res.addTrailers(enc.trailers());
  res.end();
}
