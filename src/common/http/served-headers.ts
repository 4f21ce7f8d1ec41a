import type { Response } from 'express';
import type { GatewayRequest } from './request-context';

/**
 * The contract's `Gateway-Provider`, `Gateway-Model`, `Gateway-Fallback-Used` headers for the
 * (provider, catalogue model) pair that served, also copied into the request facts for the access log.
 */
export function setServedHeaders(req: GatewayRequest, res: Response, served: { provider: string; model: string }, fallbackUsed: boolean): void {
  req.facts.provider = served.provider;
  req.facts.model = served.model;
  req.facts.fallbackUsed = fallbackUsed;
  res.setHeader('Gateway-Provider', served.provider);
  res.setHeader('Gateway-Model', served.model);
  res.setHeader('Gateway-Fallback-Used', String(fallbackUsed));
}

/**
 * Writes a JSON response directly: Express's `res.json` → `res.send` re-parses the content type
 * and builds the body twice over on every response (visible in the benchmark's profile), for nothing an API needs.
 */
export function sendJson(res: Response, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}

/** Aborted when the client goes away before the response has finished: the upstream call stops too. */
export function clientGoneSignal(res: Response): AbortSignal {
  const abort = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) abort.abort();
  });
  return abort.signal;
}
