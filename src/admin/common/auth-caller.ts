import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { Caller, GatewayRequest } from '../../common/http/request-context';

/** The caller the global API-key guard authenticated (set on every route that is not `@Public()`). */
export const AuthCaller = createParamDecorator((_: unknown, ctx: ExecutionContext): Caller => ctx.switchToHttp().getRequest<GatewayRequest>().caller!);
