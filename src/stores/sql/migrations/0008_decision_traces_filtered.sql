-- The targets routing left out of a request's candidates, and why (docs/api.md "Admin API",
-- traces): NULL or a JSON array of {"provider", "model", "reason"}, reason one of explain's filter
-- reasons (`breaker_open`, `constraint_max_cost_increase`, `firewall_blocked`, …). Ids and codes
-- only, never text of the request. A nullable column with no default: on the partitioned table it is
-- added to every partition without rewriting a row. Forward-only; runs unchanged on Postgres and PGlite.
ALTER TABLE decision_traces ADD COLUMN filtered jsonb NULL;
