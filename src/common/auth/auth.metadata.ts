import { Reflector } from '@nestjs/core';
import type { Feature, KillSwitch, Permission } from '../../config/gateway-config.schema';

/** Opts a route out of the global API-key guard (health probes, metrics). */
export const Public = Reflector.createDecorator<true>({ transform: () => true });
export const RequirePermission = Reflector.createDecorator<Permission>();
/** Pro plan with these feature flags; optional kill switch that turns the feature off. */
export const RequireFeature = Reflector.createDecorator<{ features: Feature[]; killSwitch?: KillSwitch; name: string }>();
export const RequireConfirmation = Reflector.createDecorator<string>();
