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
