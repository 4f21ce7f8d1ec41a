-- Decision traces partitioned by UTC day (docs/architecture.md "Retention"). Forward-only; runs
-- unchanged on Postgres 15+ and PGlite.
--
-- `decision_traces` becomes a table partitioned by range of created_at: one partition per UTC day,
-- `decision_traces_pYYYYMMDD` = [YYYY-MM-DD 00:00 UTC, the next day 00:00 UTC), so retention drops
-- whole days and never deletes rows one by one; and a DEFAULT partition, `decision_traces_default`,
-- which takes a trace whose day has no partition (one replayed days late, a clock far ahead), so no
-- insert ever fails for want of a partition. Bounds are written with an explicit +00 offset: the
-- session's time zone cannot move them. The retention job (src/retention/) creates the coming days'
-- partitions, moves what the default partition holds of a day when it creates that day, and drops
-- the days past `retention.traces_days`.
--
-- The traces already stored are not copied. The existing table becomes one partition,
-- `decision_traces_before_YYYYMMDD`, holding everything before that day (at least two days ahead,
-- so replicas still on the previous version keep inserting into it meanwhile); it is dropped whole
-- once that day is past retention. Attaching it costs no scan and no long lock because the
-- migrator's step for this file (0005_decision_traces_by_day.prepare.ts) has already, without
-- blocking reads or writes, validated the CHECK constraint `decision_traces_before_YYYYMMDD`
-- (created_at before that day) and built the unique index (created_at, id) concurrently. This file
-- then only renames, re-keys and attaches, in one short transaction. Run without that step (by hand),
-- it does that work itself, holding the table meanwhile.
--
-- Ids: the gateway makes each trace's id when it builds the trace (src/traces/trace-id.ts) and
-- writes with ON CONFLICT DO NOTHING on the key (created_at, id), so a batch written twice is stored
-- once. Postgres 15 has no identity columns on partitioned tables; the default below serves rows
-- inserted without an id (a replica still on the previous version during a rolling upgrade, SQL by
-- hand): the same shape as the gateway's ids (UTC day since 2025-01-01 · 2^37 + a 37-bit part), the
-- part from a sequence, in the upper half of the range the gateway's counters start in.
--
-- `decision_traces_created_idx` is not carried over: the key (created_at, id) serves the scans by
-- time, and partition pruning narrows them to the days asked for.

-- A reader of the old table (a long aggregation) would otherwise make every statement queue behind
-- the rename; the migrator tries again when this times out.
SET LOCAL lock_timeout = '5s';

DO $$
DECLARE
  bound_check text;
  bound date;
  legacy text;
BEGIN
  SELECT conname INTO bound_check FROM pg_constraint
   WHERE conrelid = 'decision_traces'::regclass AND contype = 'c' AND conname ~ '^decision_traces_before_[0-9]{8}$'
   ORDER BY conname DESC LIMIT 1;
  IF bound_check IS NULL THEN
    SELECT greatest((now() AT TIME ZONE 'UTC')::date + 2, (max(created_at) AT TIME ZONE 'UTC')::date + 1) INTO bound FROM decision_traces;
    bound_check := 'decision_traces_before_' || to_char(bound, 'YYYYMMDD');
    EXECUTE format('ALTER TABLE decision_traces ADD CONSTRAINT %I CHECK (created_at < timestamptz %L)', bound_check, to_char(bound, 'YYYY-MM-DD') || ' 00:00:00+00');
  ELSE
    EXECUTE format('ALTER TABLE decision_traces VALIDATE CONSTRAINT %I', bound_check);
  END IF;
  legacy := bound_check;

  IF NOT EXISTS (SELECT 1 FROM pg_index WHERE indexrelid = to_regclass('decision_traces_created_id_key') AND indisvalid) THEN
    DROP INDEX IF EXISTS decision_traces_created_id_key;
    CREATE UNIQUE INDEX decision_traces_created_id_key ON decision_traces (created_at, id);
  END IF;

  EXECUTE format('ALTER TABLE decision_traces RENAME TO %I', legacy);
  EXECUTE format('ALTER TABLE %I ALTER COLUMN id DROP IDENTITY', legacy);
  EXECUTE format('ALTER TABLE %I DROP CONSTRAINT decision_traces_pkey', legacy);
  EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I PRIMARY KEY USING INDEX decision_traces_created_id_key', legacy, legacy || '_pkey');
  DROP INDEX decision_traces_created_idx;
  -- The partitioned table's indexes take these names; the old ones become its partition's.
  EXECUTE format('ALTER INDEX decision_traces_org_session_idx RENAME TO %I', legacy || '_org_session_idx');
  EXECUTE format('ALTER INDEX decision_traces_experiment_idx RENAME TO %I', legacy || '_experiment_idx');
END $$;

CREATE SEQUENCE decision_traces_id_seq;

-- The columns of 0001 (+ failed_attempts of 0004), fixed-width ones first and widest first so no
-- padding is spent between them; a partition of another column order (the old table) is mapped by name.
CREATE TABLE decision_traces (
  created_at        timestamptz NOT NULL DEFAULT now(),
  id                bigint NOT NULL DEFAULT (((now() AT TIME ZONE 'UTC')::date - date '2025-01-01')::bigint * 137438953472
                                             + 68719476736 + nextval('decision_traces_id_seq') % 68719476736),
  latency_ms        double precision NOT NULL,
  ttft_ms           double precision NULL,
  cost_usd          double precision NULL,
  status            integer NOT NULL,
  attempts          integer NOT NULL DEFAULT 0,
  prompt_tokens     integer NULL,
  completion_tokens integer NULL,
  reasoning_tokens  integer NULL,
  fallback_used     boolean NOT NULL DEFAULT false,
  experiment_id     uuid NULL,
  request_id        text NOT NULL,
  org_id            text NOT NULL,
  api_key_id        text NOT NULL,
  session_id        text NULL,
  endpoint          text NOT NULL,
  requested_model   text NOT NULL,
  route             text NULL,
  strategy          text NULL,
  selected_provider text NULL,
  selected_model    text NULL,
  experiment_arm    text NULL,
  error_code        text NULL,
  finish_reason     text NULL,
  candidates        jsonb NULL,
  failed_attempts   jsonb NULL,
  PRIMARY KEY (created_at, id)
) PARTITION BY RANGE (created_at);
ALTER SEQUENCE decision_traces_id_seq OWNED BY decision_traces.id;
-- Feedback is joined to the traces of its session; the stop rules read one experiment's traces (0003).
CREATE INDEX decision_traces_org_session_idx ON decision_traces (org_id, session_id);
CREATE INDEX decision_traces_experiment_idx ON decision_traces (experiment_id, created_at) WHERE experiment_id IS NOT NULL;

-- The old table, if it holds any trace, becomes the partition of everything before its bound day;
-- day partitions then run from that day (or today) to a week ahead.
DO $$
DECLARE
  legacy text;
  has_rows boolean;
  first date := (now() AT TIME ZONE 'UTC')::date;
  d date;
BEGIN
  SELECT relname INTO STRICT legacy FROM pg_class
   WHERE relnamespace = current_schema()::regnamespace AND relkind = 'r' AND NOT relispartition
     AND relname ~ '^decision_traces_before_[0-9]{8}$';
  EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I)', legacy) INTO has_rows;
  IF has_rows THEN
    -- No scan: the validated CHECK constraint already says every row is before the bound.
    EXECUTE format('ALTER TABLE decision_traces ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO (timestamptz %L)',
                   legacy, to_char(to_date(right(legacy, 8), 'YYYYMMDD'), 'YYYY-MM-DD') || ' 00:00:00+00');
    EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', legacy, legacy);
    first := greatest(first, to_date(right(legacy, 8), 'YYYYMMDD'));
  ELSE
    -- A new installation (or one that never stored a trace): days start today.
    EXECUTE format('DROP TABLE %I', legacy);
  END IF;
  FOR d IN SELECT generate_series(first, (now() AT TIME ZONE 'UTC')::date + 7, interval '1 day')::date LOOP
    EXECUTE format('CREATE TABLE %I PARTITION OF decision_traces FOR VALUES FROM (timestamptz %L) TO (timestamptz %L)',
                   'decision_traces_p' || to_char(d, 'YYYYMMDD'), to_char(d, 'YYYY-MM-DD') || ' 00:00:00+00', to_char(d + 1, 'YYYY-MM-DD') || ' 00:00:00+00');
  END LOOP;
END $$;

CREATE TABLE decision_traces_default PARTITION OF decision_traces DEFAULT;
