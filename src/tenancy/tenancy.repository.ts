import { Injectable } from '@nestjs/common';
import { SqlExecutor, SqlStore } from '../stores/sql/sql-store';
import type { Caller } from '../common/http/request-context';
import type { KeyLimits, OrgLimits } from '../config/gateway-config.schema';
import type { ApiKeyRecord, ApiKeyView, KeyActor, KeyAuditRecord, OrgAuditRecord, OrgRecord, OrgSummary } from './tenancy.records';

interface OrgRow {
  id: string;
  name: string;
  plan: OrgRecord['plan'];
  features: OrgRecord['features'];
  monthly_request_limit: string | number | null;
  kill_switches: OrgRecord['killSwitches'];
  limits: OrgLimits | null;
  source: OrgRecord['source'];
}

const toOrg = (r: OrgRow): OrgRecord => ({
  id: r.id,
  name: r.name,
  plan: r.plan,
  features: r.features,
  monthlyRequestLimit: r.monthly_request_limit === null ? null : Number(r.monthly_request_limit),
  killSwitches: r.kill_switches,
  limits: r.limits ?? null,
  source: r.source,
});

/* Organisations and keys from gateway.yaml: the file owns their controls, so they are written as given. */
const UPSERT_ORG = `
  INSERT INTO organizations (id, name, plan, features, monthly_request_limit, kill_switches, source, limits)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb)
  ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, plan = EXCLUDED.plan, features = EXCLUDED.features,
    monthly_request_limit = EXCLUDED.monthly_request_limit, kill_switches = EXCLUDED.kill_switches,
    source = EXCLUDED.source, limits = EXCLUDED.limits, updated_at = now()`;

const UPSERT_KEY = `
  INSERT INTO api_keys (id, org_id, key_hash, key_prefix, permissions, source, limits)
  VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb)
  ON CONFLICT (id) DO UPDATE SET org_id = EXCLUDED.org_id, key_hash = EXCLUDED.key_hash,
    key_prefix = EXCLUDED.key_prefix, permissions = EXCLUDED.permissions, source = EXCLUDED.source, revoked_at = NULL,
    limits = EXCLUDED.limits`;

/*
 * What may be shown of a key: never key_hash. `position` is created_at to the microsecond in UTC,
 * the page cursor's key (a JavaScript Date keeps milliseconds only, so it could skip or repeat rows).
 */
const KEY_VIEW = `id, org_id, key_prefix, permissions, source, created_at, revoked_at, last_used_at, limits,
  to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS position`;
const INSERT_KEY = `
  INSERT INTO api_keys (id, org_id, key_hash, key_prefix, permissions, source) VALUES ($1, $2, $3, $4, $5, $6)
  RETURNING ${KEY_VIEW}`;

/** Config keys that left the config file are revoked, so removing a key from config takes effect. */
const REVOKE_CONFIG_KEYS_EXCEPT = `
  UPDATE api_keys SET revoked_at = now()
  WHERE source = 'config' AND revoked_at IS NULL AND NOT (id = ANY($1::text[]))
  RETURNING key_hash, id, org_id`;

const FIND_CALLER = `
  SELECT k.id AS key_id, k.permissions, o.id AS org_id, o.plan, o.features, o.kill_switches, o.monthly_request_limit,
    k.limits AS key_limits, o.limits AS org_limits
  FROM api_keys k JOIN organizations o ON o.id = k.org_id
  WHERE k.key_hash = $1 AND k.revoked_at IS NULL`;

const REVOKE_KEY = `UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL RETURNING key_hash, id, org_id`;

/*
 * The Admin API's reads and writes of one organisation's keys. Every statement names the
 * organisation, so another organisation's key is found exactly like a missing one (docs/api.md
 * "Admin API"). Newest first, served by api_keys_org_created_idx; `$4` filters on revocation.
 */
const PAGE_KEYS = `
  SELECT ${KEY_VIEW} FROM api_keys
  WHERE org_id = $1 AND ($2::timestamptz IS NULL OR (created_at, id) < ($2::timestamptz, $3::text))
    AND ($4::boolean IS NULL OR (revoked_at IS NOT NULL) = $4::boolean)
  ORDER BY created_at DESC, id DESC
  LIMIT $5`;
const FIND_KEY_IN_ORG = `SELECT ${KEY_VIEW} FROM api_keys WHERE id = $1 AND org_id = $2`;
const LOCK_KEY_IN_ORG = `${FIND_KEY_IN_ORG} FOR UPDATE`;
const REVOKE_KEY_IN_ORG = `
  UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND org_id = $2 AND revoked_at IS NULL
  RETURNING key_hash, ${KEY_VIEW}`;

/* A key's controls, set through the Admin API (the caller checked it is not from gateway.yaml). */
const SET_KEY_LIMITS = `
  UPDATE api_keys SET limits = $3::jsonb WHERE id = $1 AND org_id = $2
  RETURNING key_hash, ${KEY_VIEW}`;

/* An organisation's controls (docs/api.md "Admin API", limits), read and changed under its row lock. */
const LOCK_ORG = `SELECT id, name, plan, features, monthly_request_limit, kill_switches, source, limits FROM organizations WHERE id = $1 FOR UPDATE`;
const SET_ORG_LIMITS = `UPDATE organizations SET limits = $2::jsonb, updated_at = now() WHERE id = $1`;
const INSERT_ORG_AUDIT = `
  INSERT INTO org_audit (org_id, action, actor, actor_key_id, detail) VALUES ($1, $2, $3, $4, $5::jsonb)`;
const PAGE_ORG_AUDIT = `
  SELECT id::text AS id, org_id, action, actor, actor_key_id, detail, created_at FROM org_audit
  WHERE org_id = $1 AND id > $2::bigint
  ORDER BY id
  LIMIT $3`;

const INSERT_AUDIT = `
  INSERT INTO key_audit (org_id, key_id, action, actor, actor_key_id, detail) VALUES ($1, $2, $3, $4, $5, $6::jsonb)`;
/* A key's history, oldest first, after the cursor's row id (key_audit_org_key_idx). */
const PAGE_AUDIT = `
  SELECT id::text AS id, org_id, key_id, action, actor, actor_key_id, detail, created_at FROM key_audit
  WHERE org_id = $1 AND key_id = $2 AND id > $3::bigint
  ORDER BY id
  LIMIT $4`;

/*
 * "Last used", batched (KeyUsageRecorder): one statement per flush for every key seen since the
 * last one; a time never moves back, so replicas flushing in any order agree.
 */
const TOUCH_LAST_USED = `
  UPDATE api_keys k SET last_used_at = u.at
  FROM unnest($1::text[], $2::timestamptz[]) AS u (id, at)
  WHERE k.id = u.id AND (k.last_used_at IS NULL OR k.last_used_at < u.at)`;

interface KeyViewRow {
  id: string;
  org_id: string;
  key_prefix: string;
  permissions: ApiKeyView['permissions'];
  source: ApiKeyView['source'];
  created_at: Date | string;
  revoked_at: Date | string | null;
  last_used_at: Date | string | null;
  limits: KeyLimits | null;
  position: string;
}

const date = (v: Date | string): Date => (v instanceof Date ? v : new Date(v));
const dateOrNull = (v: Date | string | null): Date | null => (v === null ? null : date(v));

const toKeyView = (r: KeyViewRow): ApiKeyView => ({
  id: r.id,
  orgId: r.org_id,
  keyPrefix: r.key_prefix,
  permissions: r.permissions,
  source: r.source,
  createdAt: date(r.created_at),
  revokedAt: dateOrNull(r.revoked_at),
  lastUsedAt: dateOrNull(r.last_used_at),
  limits: r.limits ?? null,
  position: r.position,
});

const jsonOrNull = (v: object | null): string | null => (v === null ? null : JSON.stringify(v));

const hasControls = (l: OrgLimits | null): l is OrgLimits =>
  l !== null && (l.requests_per_minute !== undefined || l.tokens_per_minute !== undefined || l.monthly_budget_usd !== undefined || l.models !== undefined);

/**
 * The caller with its key's and organisation's controls (README "Limits"): `limits` only when one
 * of them has a control, so a caller without any costs the limiter nothing; the key's `expires_at`
 * as `expiresAt`.
 */
function withControls(caller: Caller, key: KeyLimits | null, org: OrgLimits | null): Caller {
  const { expires_at: expiresAt, ...keyControls } = key ?? {};
  if (expiresAt !== undefined) caller.expiresAt = Date.parse(expiresAt);
  const limits: NonNullable<Caller['limits']> = {};
  if (hasControls(keyControls)) limits.key = keyControls;
  if (hasControls(org)) limits.org = org;
  if (limits.key || limits.org) caller.limits = limits;
  return caller;
}

/** A revoked key: its hash (for the caches) and where it lived (for the audit). */
export interface RevokedKey {
  hash: string;
  id: string;
  orgId: string;
}

const LIST_ORGS = `
  SELECT o.id, o.name, o.plan, o.features, o.monthly_request_limit, o.kill_switches, o.source, o.limits,
    (SELECT count(*) FROM api_keys k WHERE k.org_id = o.id AND k.revoked_at IS NULL) AS active_keys
  FROM organizations o ORDER BY o.id`;

const ACTIVE_KEY_HASHES_OF_ORGS = `SELECT key_hash FROM api_keys WHERE org_id = ANY($1::text[]) AND revoked_at IS NULL`;
const FIND_ORG = `SELECT id, name, plan, features, monthly_request_limit, kill_switches, source, limits FROM organizations WHERE id = $1`;

/** Every SQL statement of tenancy. */
@Injectable()
export class TenancyRepository {
  constructor(private readonly sql: SqlStore) {}

  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    return this.sql.transaction(fn);
  }

  async upsertOrg(org: OrgRecord, tx: SqlExecutor = this.sql): Promise<void> {
    await tx.query(UPSERT_ORG, [org.id, org.name, org.plan, org.features, org.monthlyRequestLimit, org.killSwitches, org.source, jsonOrNull(org.limits)]);
  }

  async upsertKey(key: ApiKeyRecord, tx: SqlExecutor = this.sql): Promise<void> {
    await tx.query(UPSERT_KEY, [key.id, key.orgId, key.keyHash, key.keyPrefix, key.permissions, key.source, jsonOrNull(key.limits ?? null)]);
  }

  async insertKey(key: ApiKeyRecord, tx: SqlExecutor = this.sql): Promise<ApiKeyView> {
    const r = await tx.query<KeyViewRow>(INSERT_KEY, [key.id, key.orgId, key.keyHash, key.keyPrefix, key.permissions, key.source]);
    return toKeyView(r.rows[0]);
  }

  /** The config keys it revoked (their hashes for cache eviction, ids for the audit). */
  async revokeConfigKeysExcept(ids: string[], tx: SqlExecutor = this.sql): Promise<RevokedKey[]> {
    const r = await tx.query<{ key_hash: string; id: string; org_id: string }>(REVOKE_CONFIG_KEYS_EXCEPT, [ids]);
    return r.rows.map((x) => ({ hash: x.key_hash, id: x.id, orgId: x.org_id }));
  }

  /** One page of the organisation's keys, newest first, after `after` (a row's `position` and id); `revoked` filters when set. */
  async pageKeys(orgId: string, after: { position: string; id: string } | null, revoked: boolean | null, limit: number): Promise<ApiKeyView[]> {
    const r = await this.sql.query<KeyViewRow>(PAGE_KEYS, [orgId, after?.position ?? null, after?.id ?? null, revoked, limit]);
    return r.rows.map(toKeyView);
  }

  async findKeyInOrg(orgId: string, id: string): Promise<ApiKeyView | null> {
    const r = await this.sql.query<KeyViewRow>(FIND_KEY_IN_ORG, [id, orgId]);
    return r.rows[0] ? toKeyView(r.rows[0]) : null;
  }

  /** The organisation's key, row-locked until the transaction ends; null when it has none of that id. */
  async lockKeyInOrg(orgId: string, id: string, tx: SqlExecutor): Promise<ApiKeyView | null> {
    const r = await tx.query<KeyViewRow>(LOCK_KEY_IN_ORG, [id, orgId]);
    return r.rows[0] ? toKeyView(r.rows[0]) : null;
  }

  /** Revokes the organisation's active key; null when it has no such active key. */
  async revokeKeyInOrg(orgId: string, id: string, tx: SqlExecutor): Promise<{ hash: string; key: ApiKeyView } | null> {
    const r = await tx.query<KeyViewRow & { key_hash: string }>(REVOKE_KEY_IN_ORG, [id, orgId]);
    return r.rows[0] ? { hash: r.rows[0].key_hash, key: toKeyView(r.rows[0]) } : null;
  }

  /** Sets the organisation's key's controls; null when it has no key of that id. */
  async setKeyLimits(orgId: string, id: string, limits: KeyLimits | null, tx: SqlExecutor): Promise<{ hash: string; key: ApiKeyView } | null> {
    const r = await tx.query<KeyViewRow & { key_hash: string }>(SET_KEY_LIMITS, [id, orgId, jsonOrNull(limits)]);
    return r.rows[0] ? { hash: r.rows[0].key_hash, key: toKeyView(r.rows[0]) } : null;
  }

  /** The organisation, row-locked until the transaction ends; null when there is none. */
  async lockOrg(id: string, tx: SqlExecutor): Promise<OrgRecord | null> {
    const r = await tx.query<OrgRow>(LOCK_ORG, [id]);
    return r.rows[0] ? toOrg(r.rows[0]) : null;
  }

  async setOrgLimits(id: string, limits: OrgLimits | null, tx: SqlExecutor): Promise<void> {
    await tx.query(SET_ORG_LIMITS, [id, jsonOrNull(limits)]);
  }

  async insertOrgAudit(entry: { orgId: string; action: string; by: KeyActor; detail: Record<string, unknown> | null }, tx: SqlExecutor): Promise<void> {
    const actorKeyId = entry.by.actor === 'api' ? entry.by.keyId : null;
    await tx.query(INSERT_ORG_AUDIT, [entry.orgId, entry.action, entry.by.actor, actorKeyId, entry.detail === null ? null : JSON.stringify(entry.detail)]);
  }

  /** One page of the organisation's audit rows, oldest first, after the row id `afterId` ("0" for the first page). */
  async pageOrgAudit(orgId: string, afterId: string, limit: number): Promise<OrgAuditRecord[]> {
    const r = await this.sql.query<{
      id: string;
      org_id: string;
      action: string;
      actor: OrgAuditRecord['actor'];
      actor_key_id: string | null;
      detail: Record<string, unknown> | null;
      created_at: Date | string;
    }>(PAGE_ORG_AUDIT, [orgId, afterId, limit]);
    return r.rows.map((x) => ({
      id: String(x.id),
      orgId: x.org_id,
      action: x.action,
      actor: x.actor,
      actorKeyId: x.actor_key_id,
      detail: x.detail ?? null,
      createdAt: date(x.created_at),
    }));
  }

  async insertAudit(
    entry: { orgId: string; keyId: string; action: string; by: KeyActor; detail: Record<string, unknown> | null },
    tx: SqlExecutor,
  ): Promise<void> {
    const actorKeyId = entry.by.actor === 'api' ? entry.by.keyId : null;
    await tx.query(INSERT_AUDIT, [entry.orgId, entry.keyId, entry.action, entry.by.actor, actorKeyId, entry.detail === null ? null : JSON.stringify(entry.detail)]);
  }

  /** One page of a key's audit rows, oldest first, after the row id `afterId` ("0" for the first page). */
  async pageAudit(orgId: string, keyId: string, afterId: string, limit: number): Promise<KeyAuditRecord[]> {
    const r = await this.sql.query<{
      id: string;
      org_id: string;
      key_id: string;
      action: string;
      actor: KeyAuditRecord['actor'];
      actor_key_id: string | null;
      detail: Record<string, unknown> | null;
      created_at: Date | string;
    }>(PAGE_AUDIT, [orgId, keyId, afterId, limit]);
    return r.rows.map((x) => ({
      id: String(x.id),
      orgId: x.org_id,
      keyId: x.key_id,
      action: x.action,
      actor: x.actor,
      actorKeyId: x.actor_key_id,
      detail: x.detail ?? null,
      createdAt: date(x.created_at),
    }));
  }

  /** Moves each key's last_used_at forward to its time (never back). */
  async touchLastUsed(ids: readonly string[], at: readonly Date[]): Promise<void> {
    if (ids.length === 0) return;
    await this.sql.query(TOUCH_LAST_USED, [ids, at.map((d) => d.toISOString())]);
  }

  async activeKeyHashesOf(orgIds: string[]): Promise<string[]> {
    const r = await this.sql.query<{ key_hash: string }>(ACTIVE_KEY_HASHES_OF_ORGS, [orgIds]);
    return r.rows.map((x) => x.key_hash);
  }

  async revokeKey(id: string, tx: SqlExecutor = this.sql): Promise<RevokedKey | null> {
    const r = await tx.query<{ key_hash: string; id: string; org_id: string }>(REVOKE_KEY, [id]);
    const row = r.rows[0];
    return row ? { hash: row.key_hash, id: row.id, orgId: row.org_id } : null;
  }

  /** `deadlineMs`: a request waits on this read (see QueryOptions). */
  async findCallerByHash(hash: string, deadlineMs?: number): Promise<Caller | null> {
    const r = await this.sql.query<{
      key_id: string;
      permissions: Caller['permissions'];
      org_id: string;
      plan: Caller['plan'];
      features: Caller['features'];
      kill_switches: Caller['killSwitches'];
      monthly_request_limit: string | number | null;
      key_limits: KeyLimits | null;
      org_limits: OrgLimits | null;
    }>(FIND_CALLER, [hash], { deadlineMs });
    const row = r.rows[0];
    if (!row) return null;
    return withControls(
      {
        orgId: row.org_id,
        keyId: row.key_id,
        plan: row.plan,
        features: row.features,
        permissions: row.permissions,
        killSwitches: row.kill_switches,
        monthlyRequestLimit: row.monthly_request_limit === null ? null : Number(row.monthly_request_limit),
      },
      row.key_limits,
      row.org_limits,
    );
  }

  async findOrg(id: string): Promise<OrgRecord | null> {
    const r = await this.sql.query<OrgRow>(FIND_ORG, [id]);
    return r.rows[0] ? toOrg(r.rows[0]) : null;
  }

  async listOrgs(): Promise<OrgSummary[]> {
    const r = await this.sql.query<OrgRow & { active_keys: string | number }>(LIST_ORGS);
    return r.rows.map((row) => ({ ...toOrg(row), activeKeys: Number(row.active_keys) }));
  }
}
