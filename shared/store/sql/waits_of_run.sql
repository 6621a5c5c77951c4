-- The waits under way of the run $1 (its steps `waiting`; NULL: of every run, the inbox), up to
-- $2, the oldest first: what each waits for, until when, its completion token, and what decided
-- it while its run is paused.
SELECT s.id AS step_id, s.run_id, r.name AS run_name, s.name, w.kind, w.name AS wait_name, w.key, w.due_at,
       w.started_at, w.token, w.completion->>'by' AS decided_by, coalesce(s.wait, '{}') AS "wait!"
FROM waits w
JOIN steps s ON s.id = w.step_id AND s.status = 'waiting' AND s.attempt = w.attempt
JOIN workflow_runs r ON r.id = s.run_id
WHERE ($1::uuid IS NULL OR w.run_id = $1::uuid)
ORDER BY w.started_at, s.name
LIMIT $2::bigint
