import { Injectable } from '@nestjs/common';
import { SqlExecutor, SqlStore } from '../stores/sql/sql-store';
import type { Caller } from '../common/http/request-context';
import type { ApiKeyRecord, OrgRecord, OrgSummary } from './tenancy.records';

interface OrgRow {
  id: string;
  name: string;
  plan: OrgRecord['plan'];
  features: OrgRecord['features'];
  monthly_request_limit: string | number | null;
  kill_switches: OrgRecord['killSwitches'];
  source: OrgRecord['source'];
}

const toOrg = (r: OrgRow): OrgRecord => ({
  id: r.id,
  name: r.name,
  plan: r.plan,
  features: r.features,
  monthlyRequestLimit: r.monthly_request_limit === null ? null : Number(r.monthly_request_limit),
  killSwitches: r.kill_switches,
  source: r.source,
});

const UPSERT_ORG = `
  INSERT INTO organizations (id, name, plan, features, monthly_request_limit, kill_switches, source)
  VALUES ($1, $2, $3, $4, $5, $6, $7)
  ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, plan = EXCLUDED.plan, features = EXCLUDED.features,
    monthly_request_limit = EXCLUDED.monthly_request_limit, kill_switches = EXCLUDED.kill_switches,
    source = EXCLUDED.source, updated_at = now()`;

const UPSERT_KEY = `
  INSERT INTO api_keys (id, org_id, key_hash, key_prefix, permissions, source)
  VALUES ($1, $2, $3, $4, $5, $6)
  ON CONFLICT (id) DO UPDATE SET org_id = EXCLUDED.org_id, key_hash = EXCLUDED.key_hash,
    key_prefix = EXCLUDED.key_prefix, permissions = EXCLUDED.permissions, source = EXCLUDED.source, revoked_at = NULL`;

const INSERT_KEY = `
  INSERT INTO api_keys (id, org_id, key_hash, key_prefix, permissions, source) VALUES ($1, $2, $3, $4, $5, $6)`;

/** Config keys that left the config file are revoked, so removing a key from config takes effect. */
const REVOKE_CONFIG_KEYS_EXCEPT = `
  UPDATE api_keys SET revoked_at = now()
  WHERE source = 'config' AND revoked_at IS NULL AND NOT (id = ANY($1::text[]))
  RETURNING key_hash`;

const FIND_CALLER = `
  SELECT k.id AS key_id, k.permissions, o.id AS org_id, o.plan, o.features, o.kill_switches, o.monthly_request_limit
  FROM api_keys k JOIN organizations o ON o.id = k.org_id
  WHERE k.key_hash = $1 AND k.revoked_at IS NULL`;

const REVOKE_KEY = `UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL RETURNING key_hash`;

const LIST_ORGS = `
  SELECT o.id, o.name, o.plan, o.features, o.monthly_request_limit, o.kill_switches, o.source,
    (SELECT count(*) FROM api_keys k WHERE k.org_id = o.id AND k.revoked_at IS NULL) AS active_keys
  FROM organizations o ORDER BY o.id`;

const ACTIVE_KEY_HASHES_OF_ORGS = `SELECT key_hash FROM api_keys WHERE org_id = ANY($1::text[]) AND revoked_at IS NULL`;
const FIND_ORG = `SELECT id, name, plan, features, monthly_request_limit, kill_switches, source FROM organizations WHERE id = $1`;

/** Every SQL statement of tenancy. */
@Injectable()
export class TenancyRepository {
  constructor(private readonly sql: SqlStore) {}

  transaction<T>(fn: (tx: SqlExecutor) => Promise<T>): Promise<T> {
    return this.sql.transaction(fn);
  }

  async upsertOrg(org: OrgRecord, tx: SqlExecutor = this.sql): Promise<void> {
    await tx.query(UPSERT_ORG, [org.id, org.name, org.plan, org.features, org.monthlyRequestLimit, org.killSwitches, org.source]);
  }

  async upsertKey(key: ApiKeyRecord, tx: SqlExecutor = this.sql): Promise<void> {
    await tx.query(UPSERT_KEY, [key.id, key.orgId, key.keyHash, key.keyPrefix, key.permissions, key.source]);
  }

  async insertKey(key: ApiKeyRecord): Promise<void> {
    await this.sql.query(INSERT_KEY, [key.id, key.orgId, key.keyHash, key.keyPrefix, key.permissions, key.source]);
  }

  /** Returns the hashes of the keys it revoked (for cache eviction). */
  async revokeConfigKeysExcept(ids: string[], tx: SqlExecutor = this.sql): Promise<string[]> {
    const r = await tx.query<{ key_hash: string }>(REVOKE_CONFIG_KEYS_EXCEPT, [ids]);
    return r.rows.map((x) => x.key_hash);
  }

  async activeKeyHashesOf(orgIds: string[]): Promise<string[]> {
    const r = await this.sql.query<{ key_hash: string }>(ACTIVE_KEY_HASHES_OF_ORGS, [orgIds]);
    return r.rows.map((x) => x.key_hash);
  }

  async revokeKey(id: string): Promise<string | null> {
    const r = await this.sql.query<{ key_hash: string }>(REVOKE_KEY, [id]);
    return r.rows[0]?.key_hash ?? null;
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
    }>(FIND_CALLER, [hash], { deadlineMs });
    const row = r.rows[0];
    if (!row) return null;
    return {
      orgId: row.org_id,
      keyId: row.key_id,
      plan: row.plan,
      features: row.features,
      permissions: row.permissions,
      killSwitches: row.kill_switches,
      monthlyRequestLimit: row.monthly_request_limit === null ? null : Number(row.monthly_request_limit),
    };
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
