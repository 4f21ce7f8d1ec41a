-- Admin reads at volume (docs/architecture.md "Usage from rollups"). Forward-only; runs unchanged on
-- Postgres 15+ and PGlite.

-- Dropping the old index locks decision_traces briefly: a long reader of it would otherwise make
-- every statement queue behind the drop; the migrator tries again when this times out.
SET LOCAL lock_timeout = '5s';

-- GET /v1/admin/usage reads these instead of rescanning decision_traces: per organisation, bucket
-- width (`step`: minute, hour, day), dimension (`dim`: '' for the organisation's total, or model,
-- provider, key, route, status) and bucket, one row per value of the dimension ('' where the trace
-- has none) with what a usage point answers. Every trace is added once to each (step, dim) row it
-- falls in, by its transaction id like the learning rollups (rollup_state 'usage'), so a row holds
-- exactly the figures the raw traces of its bucket give. Minute rows are kept for a short horizon
-- (rollup_state.window_start), hour and day rows for `retention.rollups_days`. Derived: the rows can
-- be rebuilt from the traces (the job does when its state row is missing).
--
--   requests, errors (status >= 400), fallbacks, tokens    counts and integer sums
--   cost_usd                                                exact numeric sum of cost_usd
--   error_codes / error_counts                              the errors per code ('unknown' for none)
--   traffic_providers / traffic_models / traffic_counts     requests per selected (provider, model); NULL where none
--   latency_bins / latency_n / latency_sum                  the latency histogram of the 2xx requests
--                                                           (src/learning/rollups/latency-histogram.ts)
--   latency_p50 / p90 / p99                                 read from that histogram when it was written,
--                                                           so a whole bucket needs no histogram read
--
-- The key leads with what every read fixes (organisation, step, dimension) and ends with the order
-- points are paged in (bucket, value): a page is one index range.
CREATE TABLE usage_rollups (
  org_id            text NOT NULL,
  step              text NOT NULL CHECK (step IN ('minute', 'hour', 'day')),
  dim               text NOT NULL,
  bucket            timestamptz NOT NULL,
  value             text NOT NULL,
  requests          bigint NOT NULL,
  errors            bigint NOT NULL,
  fallbacks         bigint NOT NULL,
  prompt_tokens     bigint NOT NULL,
  completion_tokens bigint NOT NULL,
  reasoning_tokens  bigint NOT NULL,
  cost_usd          numeric NOT NULL,
  latency_p50       double precision NULL,
  latency_p90       double precision NULL,
  latency_p99       double precision NULL,
  error_codes       text[] NOT NULL,
  error_counts      bigint[] NOT NULL,
  traffic_providers text[] NOT NULL,
  traffic_models    text[] NOT NULL,
  traffic_counts    bigint[] NOT NULL,
  latency_bins      integer[] NOT NULL,
  latency_n         bigint[] NOT NULL,
  latency_sum       double precision[] NOT NULL,
  PRIMARY KEY (org_id, step, dim, bucket, value)
);

-- The two indexes below are built on every partition of decision_traces. On Postgres the migrator's
-- step for this file (0012_usage_rollups.prepare.ts) has already built each partition's own with
-- CREATE INDEX CONCURRENTLY, while traces kept being written; CREATE INDEX on the parent then finds
-- them and attaches them, a catalog change. Run without that step (by hand, or on PGlite), it builds
-- them itself, holding the partitions' inserts meanwhile.

-- The Admin API's trace search by request id or session id over days of traces. A BRIN bloom index:
-- per range of 32 heap pages, a bloom filter of the ids in it (a false positive rate of 0.1 %), so a
-- lookup reads the filters (about 4 bytes a trace in all) and the few ranges that may hold the id,
-- not the days of traces a scan of the key would. A range has no filter until it is summarized
-- (autosummarize: by autovacuum soon after it fills); until then a lookup reads it whole. It replaces the btree on (org_id, session_id)
-- (about 33 bytes a trace), which nothing reads any more: the learning and experiment rollups keep
-- their own session rows.
CREATE INDEX decision_traces_request_session_idx ON decision_traces USING brin (
  request_id text_bloom_ops (n_distinct_per_range = 1000, false_positive_rate = 0.001),
  session_id text_bloom_ops (n_distinct_per_range = 400, false_positive_rate = 0.001)
) WITH (pages_per_range = 32, autosummarize = on);
DROP INDEX decision_traces_org_session_idx;

-- The trace search by status (a class or one status) or error code over days: errors are a few per
-- cent of the traces, so the organisation's newest errors are a short walk of this partial index
-- (about 2 bytes a trace at 3 % errors) instead of a walk of every trace of the range. Ordered as the
-- search orders, (created_at, id) within the organisation.
CREATE INDEX decision_traces_errors_idx ON decision_traces (org_id, created_at, id) WHERE status >= 400 OR error_code IS NOT NULL;
