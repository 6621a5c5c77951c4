-- How deep a child made by the step $1 would be: 1 for a step of a run that is no one's child,
-- one more for each ancestor run (through `workflow_runs.parent_step_id`), counted up to $2.
WITH RECURSIVE up (run_id, depth) AS (
    SELECT s.run_id, 1 FROM steps s WHERE s.id = $1::uuid
    UNION ALL
    SELECT p.run_id, u.depth + 1
    FROM up u
    JOIN workflow_runs r ON r.id = u.run_id
    JOIN steps p ON p.id = r.parent_step_id
    WHERE u.depth <= $2::int
)
SELECT max(depth) AS "depth!" FROM up
