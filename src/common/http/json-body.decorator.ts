import { createParamDecorator, ExecutionContext, PipeTransform } from '@nestjs/common';
import { JsonBodyOptions, parseJsonSafely, readRawBody } from './json-body';
import type { GatewayRequest } from './request-context';

export const KiB = 1024;
export const MiB = 1024 * 1024;

/** The request itself: JsonBodyPipe reads its body. */
const RequestParam = createParamDecorator((_: unknown, ctx: ExecutionContext) => ctx.switchToHttp().getRequest<GatewayRequest>());

/** Reads the raw body with the route's cap and parses it safely. */
class JsonBodyPipe implements PipeTransform<GatewayRequest, Promise<unknown>> {
  constructor(private readonly opts: JsonBodyOptions) {}

  async transform(req: GatewayRequest): Promise<unknown> {
    return parseJsonSafely(await readRawBody(req, this.opts.limit), this.opts.invalidCode);
  }
}

/**
 * `@JsonBody({ limit, invalidCode }) body`: the route's JSON body, read with that route's cap. Express's
 * global body parser is off, and parameter pipes run after the guards, so 401/403 and the
 * confirmation check come before any 400 about the body (docs/api.md "Check order").
 * Further pipes (a DTO's, `ValidBody`) run on the parsed value, in order.
 *
 * A parameter, not an interceptor: one global interceptor puts every request of every route through
 * Nest's rxjs interceptor chain (≈ 10 % of the CPU of a chat request in the benchmark's profile).
 */
export const JsonBody = (opts: JsonBodyOptions, ...pipes: PipeTransform[]): ParameterDecorator => RequestParam(opts, new JsonBodyPipe(opts), ...pipes);
