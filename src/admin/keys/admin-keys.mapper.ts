import type { KeyLimits } from '../../config/gateway-config.schema';
import type { ApiKeyView, KeyAuditRecord } from '../../tenancy/tenancy.records';
import { iso } from '../common/admin-store';

/** A key as the Admin API shows it: never the key or its hash (docs/api.md "Admin API", keys). */
export interface AdminKeyJson {
  id: string;
  /** The key's first characters, for people to recognise it. */
  prefix: string;
  permissions: string[];
  source: string;
  /** From gateway.yaml: changed only there. */
  config_managed: boolean;
  created_at: string;
  last_used_at: string | null;
  revoked: boolean;
  revoked_at: string | null;
  /** The key's own limits (README "Limits"); null while only the gateway-wide `limits` of the config apply. */
  limits: KeyLimits | null;
}

export interface KeyAuditJson {
  id: string;
  key_id: string;
  action: string;
  actor: string;
  actor_key_id: string | null;
  detail: Record<string, unknown> | null;
  created_at: string;
}

export function toAdminKeyJson(k: ApiKeyView): AdminKeyJson {
  return {
    id: k.id,
    prefix: k.keyPrefix,
    permissions: [...k.permissions],
    source: k.source,
    config_managed: k.source === 'config',
    created_at: k.createdAt.toISOString(),
    last_used_at: iso(k.lastUsedAt),
    revoked: k.revokedAt !== null,
    revoked_at: iso(k.revokedAt),
    limits: k.limits,
  };
}

export function toKeyAuditJson(a: KeyAuditRecord): KeyAuditJson {
  return {
    id: a.id,
    key_id: a.keyId,
    action: a.action,
    actor: a.actor,
    actor_key_id: a.actorKeyId,
    detail: a.detail,
    created_at: a.createdAt.toISOString(),
  };
}
