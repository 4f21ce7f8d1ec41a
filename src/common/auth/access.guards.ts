import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { GatewayError } from '../errors/gateway-error';
import type { GatewayRequest } from '../http/request-context';
import { RequireConfirmation, RequireFeature, RequirePermission } from './auth.metadata';

function callerOf(context: ExecutionContext) {
  const caller = context.switchToHttp().getRequest<GatewayRequest>().caller;
  // The global API-key guard runs first; reaching here without a caller is a wiring fault.
  if (!caller) throw new GatewayError('invalid_api_key');
  return caller;
}

/** 403 `read_permission` / `write_permission`. */
@Injectable()
export class PermissionGuard implements CanActivate {
  constructor(private readonly reflector: Reflector) {}
  canActivate(context: ExecutionContext): boolean {
    const needed = this.reflector.get(RequirePermission, context.getHandler());
    if (!needed) return true;
    if (!callerOf(context).permissions.includes(needed)) throw new GatewayError(`${needed}_permission`);
    return true;
  }
}

/** 403 `plan_required`: Pro plan, the feature flags, and no kill switch on (message names the feature). */
@Injectable()
export class FeatureGuard implements CanActivate {
  constructor(private readonly reflector: Reflector) {}
  canActivate(context: ExecutionContext): boolean {
    const needed = this.reflector.get(RequireFeature, context.getHandler());
    if (!needed) return true;
    const caller = callerOf(context);
    if (caller.plan !== 'pro') throw new GatewayError('plan_required', `${needed.name} requires the Pro plan.`);
    const missing = needed.features.filter((f) => !caller.features.includes(f));
    if (missing.length > 0) {
      throw new GatewayError('plan_required', `${needed.name} is not enabled for this organisation (feature ${missing.join(', ')}).`);
    }
    if (needed.killSwitch && caller.killSwitches.includes(needed.killSwitch)) {
      throw new GatewayError('plan_required', `${needed.name} is switched off for this organisation (kill switch ${needed.killSwitch}).`);
    }
    return true;
  }
}

/** 400 `missing_confirmation`: `X-Gateway-Confirm` must carry the exact value. */
@Injectable()
export class ConfirmationGuard implements CanActivate {
  constructor(private readonly reflector: Reflector) {}
  canActivate(context: ExecutionContext): boolean {
    const expected = this.reflector.get(RequireConfirmation, context.getHandler());
    if (!expected) return true;
    const got = context.switchToHttp().getRequest<GatewayRequest>().headers['x-gateway-confirm'];
    if (got !== expected) throw new GatewayError('missing_confirmation');
    return true;
  }
}
