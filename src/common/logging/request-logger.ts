import { Injectable } from '@nestjs/common';
import type { Logger } from 'pino';
import type { Request } from 'express';
import { AppLogger, REDACT } from './logger';
import type { GatewayRequest } from '../http/request-context';

/**
 * The access line is flat (strings, numbers and booleans under fixed names), so of the redaction
 * paths only the top-level ones could ever match it: a nested or wildcard path needs an object.
 */
const FLAT_REDACT = { paths: REDACT.paths.filter((p) => !/[.*[]/.test(p)), censor: REDACT.censor };

/** One access line per request, and unexpected errors with the request id; never bodies or keys. */
@Injectable()
export class RequestLogger {
  /**
   * The process logger with the top-level redaction paths only: the same line, without the
   * wildcard paths' redaction pass over every value of it (7 of the 13 KB the line allocated per
   * request in the chat benchmark's allocation profile: @pinojs/redact redactPaths).
   */
  private readonly line: Logger;

  constructor(private readonly log: AppLogger) {
    this.line = log.pino.child({}, { redact: FLAT_REDACT });
  }

  access(req: GatewayRequest, status: number, latencyMs: number): void {
    const f = req.facts;
    this.line.info(
      {
        req_id: f.requestId,
        method: req.method,
        route: f.route,
        status,
        latency_ms: Math.round(latencyMs * 1000) / 1000,
        org_id: req.caller?.orgId,
        key_id: req.caller?.keyId,
        provider: f.provider,
        model: f.model,
        fallback_used: f.fallbackUsed,
        error_code: f.errorCode,
      },
      'request',
    );
  }

  unexpected(req: Request, err: unknown): void {
    const e = err instanceof Error ? err : new Error(String(err));
    this.log.pino.error(
      { req_id: (req as GatewayRequest).facts?.requestId, err: { name: e.name, message: e.message, stack: e.stack } },
      'unexpected error',
    );
  }
}
