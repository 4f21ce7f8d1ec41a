import { applyDecorators, UseGuards } from '@nestjs/common';
import type { Permission } from '../../config/gateway-config.schema';
import { ConfirmationGuard, FeatureGuard, PermissionGuard } from './access.guards';
import { RequireConfirmation, RequireFeature, RequirePermission } from './auth.metadata';

export { Public } from './auth.metadata';

/**
 * The contract's check order, encoded once (docs/api.md "Check order"): 401 (global guard) → 403 permission →
 * 403 plan/feature → 400 missing_confirmation; the body (400s) is parsed after all guards.
 */
export function ExperimentsEndpoint(permission: Permission): MethodDecorator & ClassDecorator {
  const decorators = [
    RequirePermission(permission),
    RequireFeature({ features: ['has_test_ab'], killSwitch: 'experiments', name: 'experiments' }),
  ];
  if (permission === 'write') decorators.push(RequireConfirmation('experiments'));
  return applyDecorators(...decorators, UseGuards(PermissionGuard, FeatureGuard, ConfirmationGuard));
}

export function ExplainEndpoint(): MethodDecorator & ClassDecorator {
  return applyDecorators(
    RequirePermission('write'),
    RequireFeature({ features: ['explain', 'feedback_routing'], name: 'routing explain' }),
    UseGuards(PermissionGuard, FeatureGuard),
  );
}

/**
 * The operators' API (docs/api.md "Admin API"): 401 (global guard) → 403 `admin_permission`; no plan
 * or feature flag, since operating the gateway is not a plan feature. Query and body checks (400)
 * run after the guard, in the route. A method decorator only: the permission guard reads the
 * handler's metadata, so a class-level use would check nothing.
 */
export function AdminEndpoint(): MethodDecorator {
  return applyDecorators(RequirePermission('admin'), UseGuards(PermissionGuard));
}
