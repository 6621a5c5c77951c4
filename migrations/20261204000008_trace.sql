-- One trace per run (DESIGN.md "Tracing"): the run's W3C trace context, created at submission
-- (or continuing the submitter's `traceparent`). Every attempt span of the run is a child of
-- it; the scheduler reads it once per lease round and puts the attempt's context in the
-- message. Ids only: it says where the run's spans go, nothing about its data.

-- A fresh `traceparent` (version 00, sampled): for runs submitted without one.
CREATE FUNCTION rara_new_traceparent() RETURNS text LANGUAGE sql VOLATILE AS $$
    SELECT '00-' || md5(random()::text || clock_timestamp()::text) || '-'
        || substr(md5(random()::text || clock_timestamp()::text), 1, 16) || '-01'
$$;

-- Added without a default first, so existing rows are not rewritten (they stay NULL: runs
-- from before tracing have no trace); new runs get one.
ALTER TABLE workflow_runs ADD COLUMN trace_context text
    CONSTRAINT workflow_runs_trace_context_traceparent
    CHECK (trace_context ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$');
ALTER TABLE workflow_runs ALTER COLUMN trace_context SET DEFAULT rara_new_traceparent();
COMMENT ON COLUMN workflow_runs.trace_context IS
    'W3C traceparent of the run''s root span: every attempt span of the run is its child';

-- The archive keeps the live table's columns in the same order (20261204000004_archive.sql).
ALTER TABLE archived_workflow_runs ADD COLUMN trace_context text;
