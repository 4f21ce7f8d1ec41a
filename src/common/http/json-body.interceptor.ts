import { CallHandler, ExecutionContext, Injectable, NestInterceptor } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { from, Observable, switchMap } from 'rxjs';
import { JsonBody } from './json-body.decorator';
import { parseJsonSafely, readRawBody } from './json-body';
import type { GatewayRequest } from './request-context';

/**
 * Parses the JSON body of routes marked `@JsonBody(...)`, with that route's cap. Express's global
 * body parser is off: interceptors run after guards, so 401/403 and the confirmation check come
 * before any 400 about the body (DESIGN §5 check order, STYLE "Guards").
 */
@Injectable()
export class JsonBodyInterceptor implements NestInterceptor {
  constructor(private readonly reflector: Reflector) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const opts = this.reflector.get(JsonBody, context.getHandler());
    if (!opts || context.getType() !== 'http') return next.handle();
    const req = context.switchToHttp().getRequest<GatewayRequest>();
    return from(readRawBody(req, opts.limit)).pipe(
      switchMap((raw) => {
        req.body = parseJsonSafely(raw, opts.invalidCode);
        return next.handle();
      }),
    );
  }
}
