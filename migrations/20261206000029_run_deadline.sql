-- Run deadlines (docs/src/guide/recover.md "Run deadlines"): `timeout_seconds` at a definition's
-- top level (or `rara submit --timeout`) sets `deadline_at` at submission; the scheduler
-- cancels a run still running past it with RUN_TIMED_OUT, the earliest first, through the
-- partial index (only runs with a deadline that are running are in it).
ALTER TABLE workflow_runs ADD COLUMN deadline_at timestamptz;
CREATE INDEX workflow_runs_deadline ON workflow_runs (deadline_at) WHERE status = 'running' AND deadline_at IS NOT NULL;
ALTER TABLE archived_workflow_runs ADD COLUMN deadline_at timestamptz;
