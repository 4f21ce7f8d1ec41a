-- The decisions export (docs/operations.md "Decisions export") reads experiment lifecycle events and
-- key audit rows the way the rollups read decision traces (0006_rollups.sql): by the id of the
-- transaction that wrote each row. An export takes in the rows whose transaction ended before its
-- snapshot's xmin and at or after its cursor, so a row committed after a later one is never skipped
-- (an identity column's order is the order ids were handed out, not the order rows became visible).
-- Forward-only; runs unchanged on Postgres and PGlite.
--
-- A nullable column, then its default: adding it rewrites no row (rows written before this migration
-- keep NULL and are exported by the first pass, which reads NULL as "before every transaction"). The
-- DEFAULT stamps every insert whatever its column list. Both tables are written once per row and are
-- small next to the traces: a btree serves the range reads.
ALTER TABLE experiment_events ADD COLUMN txid bigint NULL;
ALTER TABLE experiment_events ALTER COLUMN txid SET DEFAULT pg_current_xact_id()::text::bigint;
CREATE INDEX experiment_events_txid_idx ON experiment_events (txid);

ALTER TABLE key_audit ADD COLUMN txid bigint NULL;
ALTER TABLE key_audit ALTER COLUMN txid SET DEFAULT pg_current_xact_id()::text::bigint;
CREATE INDEX key_audit_txid_idx ON key_audit (txid);
