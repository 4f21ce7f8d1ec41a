import type { Feature, KeyLimits, KillSwitch, OrgLimits, Permission, Plan } from '../config/gateway-config.schema';

/** Who made the row: gateway.yaml, the CLI, the demo seeding, or the Admin API. */
export type Source = 'config' | 'cli' | 'demo' | 'api';

export interface OrgRecord {
  id: string;
  name: string;
  plan: Plan;
  features: Feature[];
  monthlyRequestLimit: number | null;
  killSwitches: KillSwitch[];
  /** The organisation's controls (README "Limits"); null = none. */
  limits: OrgLimits | null;
  source: Source;
}

export interface ApiKeyRecord {
  id: string;
  orgId: string;
  keyHash: string;
  keyPrefix: string;
  permissions: Permission[];
  source: Source;
  /** The key's controls; written for keys from gateway.yaml, whose file owns them (null = none). */
  limits?: KeyLimits | null;
}

export interface OrgSummary extends OrgRecord {
  activeKeys: number;
}

/**
 * What may be shown of a key (docs/api.md "Admin API", keys): never the key or its hash. `limits` is
 * the key's own limits, null while only the gateway-wide ones exist.
 */
export interface ApiKeyView {
  id: string;
  orgId: string;
  keyPrefix: string;
  permissions: Permission[];
  source: Source;
  createdAt: Date;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
  limits: KeyLimits | null;
  /** The row's position in the newest-first list (created_at to the microsecond, UTC): for paging. */
  position: string;
}

/** Who changed a key: `api` names the acting key; the CLI, config seeding and the system do not. */
export type KeyActor = { actor: 'api'; keyId: string } | { actor: 'cli' | 'config' | 'system' };

/** One row of `key_audit`. */
export interface KeyAuditRecord {
  id: string;
  orgId: string;
  keyId: string;
  action: string;
  actor: KeyActor['actor'];
  actorKeyId: string | null;
  detail: Record<string, unknown> | null;
  createdAt: Date;
}

/** One row of `org_audit`: a change of the organisation's controls. */
export interface OrgAuditRecord {
  id: string;
  orgId: string;
  action: string;
  actor: KeyActor['actor'];
  actorKeyId: string | null;
  detail: Record<string, unknown> | null;
  createdAt: Date;
}
