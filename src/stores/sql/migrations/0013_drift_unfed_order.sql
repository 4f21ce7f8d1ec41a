-- The change detector's unfed samples, in the order one step takes them (the oldest traces first,
-- at most a batch: src/learning/drift/drift.repository.ts NEW_SAMPLES). Keyed by that order, the
-- partial index hands a step its batch by walking its first entries; keyed by organisation it left
-- the planner the whole table's (last_trace_at) index to walk in order, skipping every sample
-- already fed (a million of them at 10M traces, each beat). Forward-only; runs unchanged on
-- Postgres and PGlite. rollup_session_pairs is a derived table of the learning rollups.
DROP INDEX IF EXISTS rollup_session_pairs_unfed_idx;
CREATE INDEX rollup_session_pairs_unfed_idx ON rollup_session_pairs (last_trace_at, session_id, provider, model)
  WHERE NOT drift_fed AND score IS NOT NULL;
