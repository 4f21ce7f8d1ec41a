-- The learning window of a pair since its latest change point (learning_epochs): the sums of its
-- trace-level hour buckets from the first whole hour at or after the change, kept equal to them as
-- rollup_window is kept equal to the window's buckets (src/learning/rollups/learning-rollups.ts). The
-- beat used to merge those hours' latency histograms afresh every time, a cost of hours since the
-- change times bins (300,000 rows, most of a beat, for a change two weeks back); a new change point
-- builds its row once, and each beat adds what it took in. `since` is the change point the row was
-- built for: a later one replaces it. Derived, like every rollup table: cleared by a rebuild.
-- Forward-only; runs unchanged on Postgres and PGlite.
CREATE TABLE rollup_epoch_window (
  org_id   text NOT NULL,
  provider text NOT NULL,
  model    text NOT NULL,
  since    timestamptz NOT NULL,
  requests bigint NOT NULL DEFAULT 0,
  ok       bigint NOT NULL DEFAULT 0,
  cost_n   bigint NOT NULL DEFAULT 0,
  cost_sum numeric NOT NULL DEFAULT 0,
  PRIMARY KEY (org_id, provider, model)
);

-- Its latency histogram: rollup_window_latency's columns and key.
CREATE TABLE rollup_epoch_window_latency (LIKE rollup_window_latency INCLUDING ALL);
