-- The trace of each step a lease round just leased ($1): its run's trace context and the
-- attempt the claim will run (the next one, or the same one when it re-attaches to a detached
-- attempt: claim.sql), so the scheduler can emit the attempt's span and put its context in the
-- message. One statement per lease round, by primary key.
SELECT s.id AS step_id, s.run_id, s.operation,
       CASE WHEN s.remote_endpoint IS NULL THEN s.attempt + 1 ELSE s.attempt END AS "attempt!",
       r.trace_context
FROM steps s
JOIN workflow_runs r ON r.id = s.run_id
WHERE s.id = ANY($1::uuid[])
