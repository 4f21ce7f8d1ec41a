-- Key administration (docs/api.md "Admin API", keys). Forward-only; runs unchanged on Postgres and PGlite.

-- Every change of a key (created, revoked), written in the same transaction as the change
-- (docs/architecture.md "Audit events in the same transaction"): a change that fails leaves no row,
-- and a row always names a change that happened. `actor` says who made it: `api` (the Admin API; the
-- acting key is `actor_key_id`), `cli` (the gateway command), `config` (gateway.yaml at start-up: a
-- key that left the file is revoked), `system` (the demo key, created on the first embedded start).
-- `action` is open text (`created`, `revoked` today), so later changes (limits) need no schema change.
-- `detail` holds ids and permissions only, never a key or its hash. No foreign keys: the audit
-- outlives whatever it names.
CREATE TABLE key_audit (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  org_id       text NOT NULL,
  key_id       text NOT NULL,
  action       text NOT NULL,
  actor        text NOT NULL CHECK (actor IN ('api', 'cli', 'config', 'system')),
  actor_key_id text NULL,
  detail       jsonb NULL,
  created_at   timestamptz NOT NULL DEFAULT now()
);
-- A key's history, oldest first (GET /v1/admin/keys/{id}/audit pages on id).
CREATE INDEX key_audit_org_key_idx ON key_audit (org_id, key_id, id);

-- Per-key limits and budgets are a later part: NULL = only the gateway-wide limits apply (config
-- `limits`). A nullable column with no default: adding it rewrites no row.
ALTER TABLE api_keys ADD COLUMN limits jsonb NULL;

-- The Admin API lists an organisation's keys newest first, id breaking ties.
CREATE INDEX api_keys_org_created_idx ON api_keys (org_id, created_at DESC, id DESC);

-- The demo key (created once on the first embedded start) operates its organisation: an existing
-- install gets the `admin` permission a fresh one is created with.
UPDATE api_keys SET permissions = array_append(permissions, 'admin')
WHERE source = 'demo' AND NOT ('admin' = ANY (permissions));
