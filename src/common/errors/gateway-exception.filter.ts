import { ArgumentsHost, Catch, ExceptionFilter, HttpException, Injectable } from '@nestjs/common';
import type { Request, Response } from 'express';
import { RequestLogger } from '../logging/request-logger';
import { ContractBodyError, GatewayError } from './gateway-error';

/** Maps Nest's own HTTP exceptions (unknown route, wrong method) into the catalogue. */
function fromHttpException(err: HttpException): GatewayError {
  const status = err.getStatus();
  if (status === 404) return new GatewayError('not_found', 'No such endpoint.');
  if (status === 405) return new GatewayError('method_not_allowed');
  if (status === 413) return new GatewayError('body_too_large');
  if (status >= 400 && status < 500) return new GatewayError('invalid_request');
  return new GatewayError('internal');
}

/**
 * The one exception filter: every error becomes the contract's body; anything
 * unexpected is 500 `internal` with a generic message and is logged with the request id. Once
 * headers are out (an SSE stream), an SSE error event is written and the stream ends without [DONE].
 */
@Catch()
@Injectable()
export class GatewayExceptionFilter implements ExceptionFilter {
  constructor(private readonly logger: RequestLogger) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const ctx = host.switchToHttp();
    const res = ctx.getResponse<Response>();
    const req = ctx.getRequest<Request>();

    let status: number;
    let body: unknown;
    let headers: Record<string, string> | undefined;
    if (exception instanceof ContractBodyError) {
      status = exception.status;
      body = exception.body;
    } else {
      const err =
        exception instanceof GatewayError
          ? exception
          : exception instanceof HttpException
            ? fromHttpException(exception)
            : new GatewayError('internal');
      if (!(exception instanceof GatewayError) && !(exception instanceof HttpException)) {
        this.logger.unexpected(req, exception);
      }
      // A GatewayError's cause is not logged: upstream error bodies can echo key fragments.
      status = err.status;
      body = err.toBody();
      headers = err.headers;
      res.locals.errorCode = err.code;
    }

    if (res.headersSent) {
      if (!res.writableEnded) {
        res.write(`data: ${JSON.stringify(body)}\n\n`);
        res.end();
      }
      return;
    }
    if (headers) for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
    res.status(status).json(body);
  }
}
