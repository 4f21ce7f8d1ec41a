-- Rollups: mergeable partial aggregates that the learning loop, the regression detector and the
-- stop rules read instead of rescanning decision_traces (docs/architecture.md "Statistics are
-- derived, never accumulated"). Forward-only; runs unchanged on Postgres and PGlite. Every rollup row
-- is derived from traces and feedback by src/learning/rollups/ and can be rebuilt from them.

-- Which transaction wrote the row. A beat takes in exactly the rows whose transaction ended before
-- its snapshot's xmin and at or after the previous beat's: committed rows are never skipped however
-- out of order concurrent writers commit, and none is taken twice. pg_current_xact_id() is the
-- 64-bit (epoch-extended) id, so it never wraps. Rows written before this migration keep NULL: the
-- first beat's backfill takes them in. Decision traces are written once (the DEFAULT stamps every
-- insert, whatever its column list); a BRIN index, a few pages for the whole table, finds the recent
-- ones because rows land roughly in id order. A new column of a partitioned table and its index
-- reach every partition.
ALTER TABLE decision_traces ADD COLUMN txid bigint NULL;
ALTER TABLE decision_traces ALTER COLUMN txid SET DEFAULT pg_current_xact_id()::text::bigint;
CREATE INDEX decision_traces_txid_idx ON decision_traces USING brin (txid) WITH (autosummarize = on);

-- Feedback is an upsert: a trigger restamps the row on every insert and every update, whoever
-- writes it, so a changed answer is taken in again.
ALTER TABLE feedback ADD COLUMN txid bigint NULL;
CREATE FUNCTION feedback_stamp_txid() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.txid := pg_current_xact_id()::text::bigint;
  RETURN NEW;
END
$$;
CREATE TRIGGER feedback_stamp_txid BEFORE INSERT OR UPDATE ON feedback
  FOR EACH ROW EXECUTE FUNCTION feedback_stamp_txid();
CREATE INDEX feedback_txid_idx ON feedback (txid);

-- One row per pipeline ('learning', 'experiments'): every trace and feedback row with
-- txid < txid_done has been taken in. While backfill_txid is set, the rows with txid < backfill_txid
-- (or NULL) and created_at >= backfill_from are still to take in, a bounded chunk per beat.
-- window_seconds / window_start: the learning window the rollup_window totals hold (bucket-aligned).
CREATE TABLE rollup_state (
  name           text PRIMARY KEY,
  txid_done      bigint NOT NULL,
  backfill_txid  bigint NULL,
  backfill_from  timestamptz NULL,
  window_seconds double precision NULL,
  window_start   timestamptz NULL,
  updated_at     timestamptz NOT NULL DEFAULT now()
);

-- Trace-level figures per (org, provider, model, hour of created_at): requests (traces naming the
-- pair plus failed attempts), successes, cost of successes, and the latency histogram of successes
-- (log-spaced bins of ratio 1.01, stored sparse as parallel arrays: bin, count, exact sum).
CREATE TABLE rollup_model_hours (
  org_id       text NOT NULL,
  provider     text NOT NULL,
  model        text NOT NULL,
  bucket       timestamptz NOT NULL,
  requests     bigint NOT NULL DEFAULT 0,
  ok           bigint NOT NULL DEFAULT 0,
  cost_n       bigint NOT NULL DEFAULT 0,
  cost_sum     numeric NOT NULL DEFAULT 0,
  latency_bins integer[] NOT NULL DEFAULT '{}',
  latency_n    bigint[] NOT NULL DEFAULT '{}',
  latency_sum  numeric[] NOT NULL DEFAULT '{}',
  PRIMARY KEY (org_id, provider, model, bucket)
);
CREATE INDEX rollup_model_hours_bucket_idx ON rollup_model_hours (bucket);

-- Feedback samples per (org, provider, model, hour the sample entered the window, hour its feedback
-- was last given): integer sums of score, score², useful, score·useful and the NPS counts, from
-- which every mean and variance follows for any outcome weights.
CREATE TABLE rollup_sample_hours (
  org_id           text NOT NULL,
  provider         text NOT NULL,
  model            text NOT NULL,
  bucket           timestamptz NOT NULL,
  feedback_bucket  timestamptz NOT NULL,
  n                bigint NOT NULL DEFAULT 0,
  score_sum        bigint NOT NULL DEFAULT 0,
  score_sq_sum     bigint NOT NULL DEFAULT 0,
  useful_sum       bigint NOT NULL DEFAULT 0,
  score_useful_sum bigint NOT NULL DEFAULT 0,
  nps_detractors   bigint NOT NULL DEFAULT 0,
  nps_passives     bigint NOT NULL DEFAULT 0,
  nps_promoters    bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (org_id, provider, model, bucket, feedback_bucket)
);
CREATE INDEX rollup_sample_hours_bucket_idx ON rollup_sample_hours (bucket);
CREATE INDEX rollup_sample_hours_feedback_idx ON rollup_sample_hours (feedback_bucket);

-- What each (org, session, provider, model) served successfully in the window contributes: its last
-- successful chat trace, and the sample it currently adds (NULL: none) with the buckets it sits in,
-- so that a changed answer or a later trace subtracts exactly what was added before.
CREATE TABLE rollup_session_pairs (
  org_id          text NOT NULL,
  session_id      text NOT NULL,
  provider        text NOT NULL,
  model           text NOT NULL,
  last_trace_at   timestamptz NOT NULL,
  score           smallint NULL,
  useful          boolean NULL,
  bucket          timestamptz NULL,
  feedback_bucket timestamptz NULL,
  PRIMARY KEY (org_id, session_id, provider, model)
);
CREATE INDEX rollup_session_pairs_last_idx ON rollup_session_pairs (last_trace_at);

-- The sums of the buckets inside the window, kept equal to them: a bucket is added as it fills and
-- subtracted as it leaves. Integers and numerics, so adding and subtracting is exact.
CREATE TABLE rollup_window (
  org_id           text NOT NULL,
  provider         text NOT NULL,
  model            text NOT NULL,
  requests         bigint NOT NULL DEFAULT 0,
  ok               bigint NOT NULL DEFAULT 0,
  cost_n           bigint NOT NULL DEFAULT 0,
  cost_sum         numeric NOT NULL DEFAULT 0,
  n                bigint NOT NULL DEFAULT 0,
  score_sum        bigint NOT NULL DEFAULT 0,
  score_sq_sum     bigint NOT NULL DEFAULT 0,
  useful_sum       bigint NOT NULL DEFAULT 0,
  score_useful_sum bigint NOT NULL DEFAULT 0,
  nps_detractors   bigint NOT NULL DEFAULT 0,
  nps_passives     bigint NOT NULL DEFAULT 0,
  nps_promoters    bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (org_id, provider, model)
);
CREATE TABLE rollup_window_latency (
  org_id   text NOT NULL,
  provider text NOT NULL,
  model    text NOT NULL,
  bin      integer NOT NULL,
  n        bigint NOT NULL DEFAULT 0,
  total    numeric NOT NULL DEFAULT 0,
  PRIMARY KEY (org_id, provider, model, bin)
);

-- The stop rules' figures per (experiment, arm), since the experiment started (no window): the
-- same trace-level figures and latency histogram, and the sessions each arm's own target served
-- with the answer each currently contributes.
CREATE TABLE rollup_experiment_arms (
  experiment_id uuid NOT NULL,
  arm           text NOT NULL,
  requests      bigint NOT NULL DEFAULT 0,
  errors        bigint NOT NULL DEFAULT 0,
  cost_n        bigint NOT NULL DEFAULT 0,
  cost_sum      numeric NOT NULL DEFAULT 0,
  n             bigint NOT NULL DEFAULT 0,
  score_sum     bigint NOT NULL DEFAULT 0,
  useful_sum    bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (experiment_id, arm)
);
CREATE TABLE rollup_experiment_latency (
  experiment_id uuid NOT NULL,
  arm           text NOT NULL,
  bin           integer NOT NULL,
  n             bigint NOT NULL DEFAULT 0,
  total         numeric NOT NULL DEFAULT 0,
  PRIMARY KEY (experiment_id, arm, bin)
);
CREATE TABLE rollup_experiment_sessions (
  experiment_id uuid NOT NULL,
  arm           text NOT NULL,
  org_id        text NOT NULL,
  session_id    text NOT NULL,
  score         smallint NULL,
  useful        boolean NULL,
  PRIMARY KEY (experiment_id, arm, session_id)
);
CREATE INDEX rollup_experiment_sessions_session_idx ON rollup_experiment_sessions (org_id, session_id);
