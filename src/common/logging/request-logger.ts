import { Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { AppLogger } from './logger';
import type { GatewayRequest } from '../http/request-context';

/** One access line per request, and unexpected errors with the request id; never bodies or keys. */
@Injectable()
export class RequestLogger {
  constructor(private readonly log: AppLogger) {}

  access(req: GatewayRequest, status: number, latencyMs: number): void {
    const f = req.facts;
    this.log.pino.info(
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
