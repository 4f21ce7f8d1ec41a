import { Injectable, NestMiddleware } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { NextFunction, Response } from 'express';
import { DrainState } from '../lifecycle/drain-state';
import { RequestLogger } from '../logging/request-logger';
import { MetricsService } from '../../metrics/metrics.service';
import { TelemetryService } from '../../telemetry/telemetry.service';
import type { GatewayRequest } from './request-context';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Request id (taken from `x-request-id` when well-formed, else generated, always echoed), in-flight
 * tracking for draining, and on completion one access log line and the request metrics.
 */
@Injectable()
export class RequestContextMiddleware implements NestMiddleware {
  constructor(
    private readonly logger: RequestLogger,
    private readonly metrics: MetricsService,
    private readonly drain: DrainState,
    private readonly telemetry: TelemetryService,
  ) {}

  use(req: GatewayRequest, res: Response, next: NextFunction): void {
    const given = req.headers['x-request-id'];
    const requestId = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    req.facts = { requestId, startedAt: process.hrtime.bigint(), telemetry: this.telemetry.begin(req) };
    res.setHeader('x-request-id', requestId);
    this.drain.enter();
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      this.drain.leave();
      const seconds = Number(process.hrtime.bigint() - req.facts.startedAt) / 1e9;
      const route = req.route?.path ? String(req.baseUrl ?? '') + String(req.route.path) : 'unmatched';
      req.facts.route = route;
      req.facts.errorCode ??= res.locals.errorCode;
      // A client that went away before the response finished is recorded as 499, as nginx does.
      const status = res.writableFinished ? res.statusCode : 499;
      this.metrics.observe(route, req.method, status, seconds);
      this.logger.access(req, status, seconds * 1000);
      req.facts.telemetry?.responded(status, req.method, route);
    };
    res.on('finish', finish);
    res.on('close', finish);
    next();
  }
}
