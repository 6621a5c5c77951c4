-- Applies up to $1 decided completions that succeed a step (`waits.completion` holds an output)
-- to their steps: only $2 (NULL: any decided), only where the run is not paused (a paused run's
-- completions wait for it to be resumed), only a step still `waiting` at the wait's attempt.
-- The step succeeds with the completion's output and its attempt closes `succeeded`; then
-- succeed_tail.sql (sql.rs puts it in): its dependents released, the schedulers woken on the
-- channel $3, its run finished if this was its last step. Returns the steps written.
WITH picked AS (
    SELECT w.step_id, w.attempt, w.completion FROM waits w
    WHERE w.completion IS NOT NULL AND w.completion ? 'output' AND ($2::uuid[] IS NULL OR w.step_id = ANY($2::uuid[]))
      AND NOT EXISTS (SELECT 1 FROM flow_pauses p WHERE p.kind = 'run' AND p.target = w.run_id::text)
    ORDER BY w.completed_at
    LIMIT $1::bigint
),
done AS (
    UPDATE steps s
    SET status = 'succeeded', output = p.completion->'output', error = NULL, finished_at = now(),
        updated_at = now()
    FROM picked p
    WHERE s.id = p.step_id AND s.status = 'waiting' AND s.attempt = p.attempt
    RETURNING s.id, s.run_id, s.attempt
),
closed AS (
    UPDATE step_attempts a SET outcome = 'succeeded', finished_at = now()
    FROM done d WHERE a.step_id = d.id AND a.attempt = d.attempt AND a.outcome = 'running'
),
{succeed_tail}
SELECT d.id AS "id!" FROM done d CROSS JOIN (SELECT count(*) FROM woke) w
