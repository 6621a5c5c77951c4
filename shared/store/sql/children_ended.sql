-- Up to $1 child workflow waits whose child run ended, the earliest ended first (each decision
-- is conditional: two schedulers decide one once): each wait's step, attempt, child run, its name
-- and how it ended. Through waits_child: only the undecided child waits are read.
SELECT w.step_id, w.attempt, r.id AS child_run_id, r.name AS child_name, r.status AS "status: RunStatus"
FROM waits w
JOIN workflow_runs r ON r.id = w.child_run_id
WHERE w.kind = 'child' AND w.completion IS NULL AND r.status <> 'running'
ORDER BY r.finished_at
LIMIT $1::bigint

