import type { Request } from 'express';
import type { Feature, KillSwitch, OrgLimits, Permission, Plan } from '../../config/gateway-config.schema';
import type { RequestTelemetry } from '../../telemetry/request-telemetry';

/** Who is calling: set by the API-key guard, read by the other guards and services. */
export interface Caller {
  orgId: string;
  keyId: string;
  plan: Plan;
  features: readonly Feature[];
  permissions: readonly Permission[];
  killSwitches: readonly KillSwitch[];
  monthlyRequestLimit: number | null;
  /** The key's and the organisation's controls (README "Limits"); absent = none, and no limiter work. */
  limits?: { key?: OrgLimits; org?: OrgLimits };
  /** When the key stops authenticating, in ms since the epoch (its `expires_at`); absent = never. */
  expiresAt?: number;
}

/** What the request did, copied into the access log line and metrics when the response finishes. */
export interface RequestFacts {
  requestId: string;
  startedAt: bigint;
  route?: string;
  provider?: string;
  model?: string;
  fallbackUsed?: boolean;
  errorCode?: string;
  /** The request's span, or the client's trace headers to pass on; absent when there is neither (docs/architecture.md "OpenTelemetry traces"). */
  telemetry?: RequestTelemetry;
}

export type GatewayRequest = Request & { caller?: Caller; facts: RequestFacts };
