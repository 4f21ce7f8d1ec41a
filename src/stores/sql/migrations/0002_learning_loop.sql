-- Learning loop (docs/architecture.md "The learning loop"). Forward-only; runs unchanged on Postgres and PGlite.

-- How many requests (decision traces) of the model fell in the window: the denominator of
-- success_rate, and how routing tells "no traffic" from "no feedback".
ALTER TABLE model_stats ADD COLUMN requests bigint NOT NULL DEFAULT 0;

-- The aggregation job selects the feedback of the window by when it was last given.
CREATE INDEX feedback_updated_idx ON feedback (updated_at);
