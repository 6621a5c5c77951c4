-- Applies up to $1 decided completions that fail a step (`waits.completion` holds an error: a
-- rejected signal, a timeout) to their steps, as wait_succeed.sql does successes: only $2
-- (NULL: any decided), only where the run is not paused, only a step still `waiting` at the
-- wait's attempt. The targets of finish_tail.sql: its dependents are skipped.
    SELECT s.id, 'failed'::rara_step_status AS new_status, w.completion->'error' AS error,
           'failed'::rara_attempt_outcome AS attempt_outcome
    FROM waits w JOIN steps s ON s.id = w.step_id
    WHERE w.completion IS NOT NULL AND w.completion ? 'error' AND ($2::uuid[] IS NULL OR w.step_id = ANY($2::uuid[]))
      AND NOT EXISTS (SELECT 1 FROM flow_pauses p WHERE p.kind = 'run' AND p.target = w.run_id::text)
      AND s.status = 'waiting' AND s.attempt = w.attempt
    ORDER BY w.completed_at
    LIMIT $1::bigint
    FOR UPDATE OF s
