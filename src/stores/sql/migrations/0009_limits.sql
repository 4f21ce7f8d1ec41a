-- Per-key and per-organisation controls (README "Limits"; docs/api.md "Admin API", limits).
-- Forward-only; runs unchanged on Postgres and PGlite.

-- An organisation's controls (requests and tokens per minute, monthly spend budget, model
-- allow-list), as a key's are in api_keys.limits (0007); a key's also holds `expires_at`. NULL = none.
-- A nullable column with no default: adding it rewrites no row.
ALTER TABLE organizations ADD COLUMN limits jsonb NULL;

-- Every change of an organisation's controls, written in the same transaction as the change
-- (docs/architecture.md "Audit events in the same transaction"), as key_audit is for keys. `detail`
-- holds the controls before and after, never a key or its hash. No foreign keys: the audit
-- outlives what it names.
CREATE TABLE org_audit (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  org_id       text NOT NULL,
  action       text NOT NULL,
  actor        text NOT NULL CHECK (actor IN ('api', 'cli', 'config', 'system')),
  actor_key_id text NULL,
  detail       jsonb NULL,
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX org_audit_org_idx ON org_audit (org_id, id);

-- Spend per UTC month in micro-USD, from the catalogue's costs: one row per (organisation, key) and
-- one per organisation (key_id ''). Added in batches off the request path, like monthly_usage; it
-- seeds a budget counter the cache lost, and while Redis is down the budgets are checked and spent
-- here, one row at a time under its row lock.
CREATE TABLE monthly_spend (
  org_id    text NOT NULL,
  key_id    text NOT NULL,
  month     date NOT NULL,
  micro_usd bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (org_id, key_id, month)
);
