-- `rara list`: the $2 most recent runs, newest first, only those in the status $1 unless it is NULL.
SELECT id, name, status AS "status: RunStatus", steps_total,
       steps_total - steps_unfinished AS "steps_finished!", created_at, finished_at
FROM workflow_runs WHERE $1::rara_run_status IS NULL OR status = $1::rara_run_status
ORDER BY created_at DESC LIMIT $2::bigint
