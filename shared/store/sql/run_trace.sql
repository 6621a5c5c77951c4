-- The trace context of the run $1 (NULL for a run from before tracing; no row: no such run).
SELECT trace_context FROM workflow_runs WHERE id = $1::uuid
