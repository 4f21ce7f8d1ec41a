-- Analytics store schema (docs/architecture.md "Stores and their fallbacks"). Runs unchanged on Postgres 15+ and on
-- PGlite. Forward-only: a later change is a new numbered file, never an edit of this one. Each file
-- runs in one transaction, so nothing here may need to run outside one (no CREATE INDEX CONCURRENTLY).

-- Tenants. `source` tells config-upserted rows from ones the CLI created, so a config reload never
-- deletes what an operator added by hand.
CREATE TABLE organizations (
  id                    text PRIMARY KEY,
  name                  text NOT NULL,
  plan                  text NOT NULL CHECK (plan IN ('free', 'pro')),
  features              text[] NOT NULL DEFAULT '{}',
  monthly_request_limit bigint NULL CHECK (monthly_request_limit >= 0),
  kill_switches         text[] NOT NULL DEFAULT '{}',
  source                text NOT NULL DEFAULT 'config',
  created_at            timestamptz NOT NULL DEFAULT now(),
  updated_at            timestamptz NOT NULL DEFAULT now()
);

-- Keys are stored only as a peppered hash (docs/architecture.md "API keys stored as a peppered hash"); `key_prefix` is the few leading characters an
-- operator needs to recognise a key in `keys list` without the key itself.
CREATE TABLE api_keys (
  id           text PRIMARY KEY,
  org_id       text NOT NULL REFERENCES organizations (id),
  key_hash     text NOT NULL UNIQUE,
  key_prefix   text NOT NULL,
  permissions  text[] NOT NULL,
  source       text NOT NULL DEFAULT 'config',
  created_at   timestamptz NOT NULL DEFAULT now(),
  revoked_at   timestamptz NULL,
  last_used_at timestamptz NULL
);
CREATE INDEX api_keys_org_idx ON api_keys (org_id);

CREATE TABLE experiments (
  id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  org_id             text NOT NULL REFERENCES organizations (id),
  type               text NOT NULL CHECK (type IN ('canary', 'shadow')),
  status             text NOT NULL CHECK (status IN ('draft', 'active', 'completed', 'rolled_back')),
  traffic_pct        double precision NOT NULL CHECK (traffic_pct >= 0 AND traffic_pct <= 100),
  baseline_provider  text NOT NULL,
  baseline_model     text NOT NULL,
  candidate_provider text NOT NULL,
  candidate_model    text NOT NULL,
  min_n              integer NOT NULL CHECK (min_n >= 1),
  max_regression     double precision NOT NULL,
  summary            jsonb NULL,
  started_at         timestamptz NULL,
  ended_at           timestamptz NULL,
  created_at         timestamptz NOT NULL DEFAULT now(),
  created_by_key_id  text NULL
);
-- The contract's 409 `active_already_exists` must hold across replicas racing on the same pair: the
-- database refuses the second active row, so no read-then-write window exists.
CREATE UNIQUE INDEX experiments_one_active_idx
  ON experiments (org_id, baseline_provider, baseline_model, candidate_provider, candidate_model)
  WHERE status = 'active';
-- The list endpoint is newest first per organisation; id breaks ties for stable paging.
CREATE INDEX experiments_org_created_idx ON experiments (org_id, created_at DESC, id DESC);

-- Audit trail, written in the same transaction as the state change it records (docs/architecture.md
-- "Audit events in the same transaction").
CREATE TABLE experiment_events (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  experiment_id    uuid NOT NULL REFERENCES experiments (id),
  org_id           text NOT NULL,
  kind             text NOT NULL CHECK (kind IN ('created', 'started', 'rolled_back', 'completed', 'error')),
  actor_api_key_id text NULL,
  detail           jsonb NULL,
  created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX experiment_events_experiment_idx ON experiment_events (experiment_id, id);

-- High-volume, written in batches off the hot path (docs/architecture.md "Decision traces off the hot path"). No foreign keys: a trace must never
-- be refused because of tenant bookkeeping, and the table may move to a column store later.
-- `selected_*` stay nullable because a request can fail before any target is chosen (no route).
CREATE TABLE decision_traces (
  id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  request_id        text NOT NULL,
  org_id            text NOT NULL,
  api_key_id        text NOT NULL,
  session_id        text NULL,
  endpoint          text NOT NULL,
  requested_model   text NOT NULL,
  route             text NULL,
  strategy          text NULL,
  candidates        jsonb NULL,
  selected_provider text NULL,
  selected_model    text NULL,
  fallback_used     boolean NOT NULL DEFAULT false,
  attempts          integer NOT NULL DEFAULT 0,
  experiment_id     uuid NULL,
  experiment_arm    text NULL,
  status            integer NOT NULL,
  error_code        text NULL,
  latency_ms        double precision NOT NULL,
  ttft_ms           double precision NULL,
  prompt_tokens     integer NULL,
  completion_tokens integer NULL,
  reasoning_tokens  integer NULL,
  cost_usd          double precision NULL,
  finish_reason     text NULL,
  created_at        timestamptz NOT NULL DEFAULT now()
);
-- Feedback is joined to the traces of its session; the aggregation job scans by time.
CREATE INDEX decision_traces_org_session_idx ON decision_traces (org_id, session_id);
CREATE INDEX decision_traces_created_idx ON decision_traces (created_at);

-- One row per (org, session): repeated feedback replaces the earlier answer.
CREATE TABLE feedback (
  org_id     text NOT NULL,
  session_id text NOT NULL,
  score      integer NOT NULL CHECK (score BETWEEN 0 AND 10),
  useful     boolean NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (org_id, session_id)
);

-- Derived by the aggregation job, never hand-accumulated (docs/architecture.md
-- "Statistics are derived, never accumulated"). org_id '*' is
-- the cross-organisation pool used as a prior.
CREATE TABLE model_stats (
  org_id         text NOT NULL,
  provider       text NOT NULL,
  model          text NOT NULL,
  n              bigint NOT NULL DEFAULT 0,
  outcome_mean   double precision NULL,
  outcome_var    double precision NULL,
  score_mean     double precision NULL,
  score_var      double precision NULL,
  useful_rate    double precision NULL,
  useful_var     double precision NULL,
  success_rate   double precision NULL,
  latency_p50_ms double precision NULL,
  latency_p90_ms double precision NULL,
  latency_p99_ms double precision NULL,
  cost_mean_usd  double precision NULL,
  nps_detractors bigint NOT NULL DEFAULT 0,
  nps_passives   bigint NOT NULL DEFAULT 0,
  nps_promoters  bigint NOT NULL DEFAULT 0,
  window_start   timestamptz NULL,
  computed_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (org_id, provider, model)
);

-- Fallback for monthly limits when Redis is down; month = first day of the UTC month.
CREATE TABLE monthly_usage (
  org_id text NOT NULL,
  month  date NOT NULL,
  count  bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (org_id, month)
);

-- Explain reports the regressions of the last 7 days per (org, provider, model) (docs/architecture.md "Regressions").
CREATE TABLE regressions (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  org_id     text NOT NULL,
  provider   text NOT NULL,
  model      text NOT NULL,
  reason     text NOT NULL,
  detail     jsonb NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX regressions_org_model_created_idx ON regressions (org_id, provider, model, created_at);
