-- Experiment stats (docs/architecture.md "Stop rules"): experiment-stats.repository.ts reads one experiment's
-- traces, `experiment_id = $1 AND created_at >= start`, for every active experiment on every
-- stop-rule round. Without this index each read scanned the traces since the experiment started,
-- every other experiment's and those of no experiment included. Partial: most traces belong to no
-- experiment. Forward-only; runs unchanged on Postgres and PGlite.
CREATE INDEX decision_traces_experiment_idx ON decision_traces (experiment_id, created_at) WHERE experiment_id IS NOT NULL;
