import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { GatewayError } from '../errors/gateway-error';
import type { GatewayRequest } from '../http/request-context';
import { Public } from './auth.metadata';
import { ApiKeyAuthenticator } from './api-key-authenticator';

const BEARER = /^Bearer ([\x21-\x7e]{1,512})$/;

/**
 * Global, default deny: every route needs a valid bearer key unless `@Public()`.
 * Missing, malformed, unknown and revoked keys get one identical 401 `invalid_api_key`.
 */
@Injectable()
export class ApiKeyGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly authenticator: ApiKeyAuthenticator,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    if (this.reflector.getAllAndOverride(Public, [context.getHandler(), context.getClass()])) return true;
    const req = context.switchToHttp().getRequest<GatewayRequest>();
    const match = BEARER.exec(req.headers.authorization ?? '');
    const caller = match ? await this.authenticator.authenticate(match[1]) : null;
    if (!caller) throw new GatewayError('invalid_api_key');
    req.caller = caller;
    return true;
  }
}
