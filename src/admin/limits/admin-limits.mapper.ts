import type { KeyLimits, OrgLimits } from '../../config/gateway-config.schema';
import { keyedMap } from '../../common/own-key';
import type { OrgAuditRecord } from '../../tenancy/tenancy.records';

/** The organisation's controls and this month's spend (docs/api.md "Admin API", limits). */
export interface OrgLimitsJson {
  organization: string;
  /** From gateway.yaml: changed only there. */
  config_managed: boolean;
  /** The organisation's controls; null = none. */
  limits: OrgLimits | null;
  usage: {
    /** The UTC month the budgets count ('YYYY-MM'); they start again at `reset_at`. */
    month: string;
    reset_at: string;
    /** Spend this month from the catalogue's costs, in USD: the organisation's and each key's that spent. */
    spend_usd: number;
    keys: Record<string, number>;
  };
}

export interface OrgAuditJson {
  id: string;
  action: string;
  actor: string;
  actor_key_id: string | null;
  detail: Record<string, unknown> | null;
  created_at: string;
}

/** Micro-USD (as the budgets count) to USD. */
export const usd = (micro: number): number => micro / 1_000_000;

export function toOrgLimitsJson(orgId: string, configManaged: boolean, limits: OrgLimits | KeyLimits | null, month: { label: string; resetAt: number }, spend: ReadonlyMap<string, number>): OrgLimitsJson {
  const keys = keyedMap<number>();
  for (const [keyId, micro] of [...spend].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) if (keyId !== '') keys[keyId] = usd(micro);
  return {
    organization: orgId,
    config_managed: configManaged,
    limits,
    usage: { month: month.label, reset_at: new Date(month.resetAt).toISOString(), spend_usd: usd(spend.get('') ?? 0), keys },
  };
}

export function toOrgAuditJson(a: OrgAuditRecord): OrgAuditJson {
  return { id: a.id, action: a.action, actor: a.actor, actor_key_id: a.actorKeyId, detail: a.detail, created_at: a.createdAt.toISOString() };
}
