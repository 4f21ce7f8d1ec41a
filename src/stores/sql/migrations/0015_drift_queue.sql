-- The change detector's samples waiting to be fed: a queue the learning rollups add a sample to when
-- it first exists (src/learning/rollups/learning-rollups.ts) and the detector's step takes its batch
-- from, deleting it (src/learning/drift/drift.repository.ts NEW_SAMPLES). It replaces the walk of
-- rollup_session_pairs's partial index of unfed samples: marking a sample fed left its old entry in
-- that index until a vacuum of the whole table, so each step walked every sample fed since then
-- (80 ms a beat at 10M traces, hundreds of thousands after a rebuild). The queue holds the backlog
-- only. `drift_fed` on rollup_session_pairs now says the sample was queued (or was history).
-- Forward-only; runs unchanged on Postgres and PGlite. Both tables are derived from the traces.
CREATE TABLE drift_queue (
  org_id        text NOT NULL,
  session_id    text NOT NULL,
  provider      text NOT NULL,
  model         text NOT NULL,
  last_trace_at timestamptz NOT NULL,
  PRIMARY KEY (org_id, session_id, provider, model)
);
CREATE INDEX drift_queue_order_idx ON drift_queue (last_trace_at, session_id, provider, model);

INSERT INTO drift_queue (org_id, session_id, provider, model, last_trace_at)
SELECT org_id, session_id, provider, model, last_trace_at FROM rollup_session_pairs WHERE NOT drift_fed AND score IS NOT NULL;
UPDATE rollup_session_pairs SET drift_fed = true WHERE NOT drift_fed AND score IS NOT NULL;
DROP INDEX IF EXISTS rollup_session_pairs_unfed_idx;
