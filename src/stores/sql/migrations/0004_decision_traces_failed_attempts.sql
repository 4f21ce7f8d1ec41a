-- Failed fallback attempts (README "Feedback and the learning loop"). A trace names only the target
-- that served, so a target that failed and was rescued by the next one was invisible to the learning
-- loop's success rate. `failed_attempts` lists the upstream calls that failed through the provider's
-- fault before the one that served (all of them when none served): NULL or a JSON array of
-- {"provider", "model", "error": "status" | "timeout" | "network" | "protocol", "status": int | null}.
-- Never any upstream body text. Forward-only; runs unchanged on Postgres and PGlite.
ALTER TABLE decision_traces ADD COLUMN failed_attempts jsonb NULL;
