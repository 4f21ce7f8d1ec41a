-- Change detection (README "Drift: change detection"; docs/architecture.md "Statistics are derived,
-- never accumulated"): a sequential test per (organisation, provider, model) and stream, run by the
-- learning beat on the samples it takes in, and the change points it found. Forward-only; runs
-- unchanged on Postgres and PGlite.

-- Which traces the tests have taken in: every trace with txid below txid_done (the rollups' own
-- watermark, rollup-state.ts, moves in the same transactions). One row, 'drift'.
CREATE TABLE drift_state (
  name       text PRIMARY KEY,
  txid_done  bigint NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- One test per (org, provider, model, stream): 'outcome' (the feedback outcome of each session's
-- first answer) or 'auto' (each request: 0 failed, else min(1, latency target / latency)). state is
-- the CUSUM's numbers (src/learning/drift/cusum.ts); last_sample_at and org_requests_at say when the
-- pair last served a request and how many of the organisation's requests had been taken in then
-- (how long routing has starved it).
CREATE TABLE drift_detectors (
  org_id          text NOT NULL,
  provider        text NOT NULL,
  model           text NOT NULL,
  stream          text NOT NULL CHECK (stream IN ('outcome', 'auto')),
  state           jsonb NOT NULL,
  last_sample_at  timestamptz NULL,
  org_requests_at bigint NOT NULL DEFAULT 0,
  updated_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (org_id, provider, model, stream)
);

-- Requests of each organisation the tests have taken in (traces, plus failed attempts).
CREATE TABLE drift_org_requests (
  org_id   text PRIMARY KEY,
  requests bigint NOT NULL DEFAULT 0
);

-- Every change point found, kept for audit. The latest per pair starts that pair's learning window
-- (model_stats counts its samples from `since`, its traces from the first whole hour at or after it);
-- older rows stay as they were.
CREATE TABLE learning_epochs (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  org_id      text NOT NULL,
  provider    text NOT NULL,
  model       text NOT NULL,
  since       timestamptz NOT NULL,
  direction   text NOT NULL CHECK (direction IN ('drop', 'rise')),
  stream      text NOT NULL CHECK (stream IN ('outcome', 'auto')),
  detail      jsonb NULL,
  detected_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX learning_epochs_pair_idx ON learning_epochs (org_id, provider, model, since DESC);

-- A session's sample feeds the outcome test once, when it first exists (its first answer; a changed
-- answer does not feed it again). Rows that exist now were before the tests: marked fed.
ALTER TABLE rollup_session_pairs ADD COLUMN drift_fed boolean NOT NULL DEFAULT true;
ALTER TABLE rollup_session_pairs ALTER COLUMN drift_fed SET DEFAULT false;
CREATE INDEX rollup_session_pairs_unfed_idx ON rollup_session_pairs (org_id) WHERE NOT drift_fed AND score IS NOT NULL;
-- The samples of one pair in the hour of its change point (the part of that hour's bucket after it).
CREATE INDEX rollup_session_pairs_pair_bucket_idx ON rollup_session_pairs (org_id, provider, model, bucket);
