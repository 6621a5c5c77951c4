-- The API's and console's runs page: up to $7 runs, newest first (creation time, then id),
-- in the status $1, named $2, created at or after $3 and before $4 (each unless NULL), after
-- the cursor ($5, $6: the creation time and id of the previous page's last run) unless NULL.
SELECT id, name, status AS "status: RunStatus", steps_total,
       steps_total - steps_unfinished AS "steps_finished!", created_at, finished_at
FROM workflow_runs
WHERE ($1::rara_run_status IS NULL OR status = $1::rara_run_status)
  AND ($2::text IS NULL OR name = $2::text)
  AND ($3::timestamptz IS NULL OR created_at >= $3::timestamptz)
  AND ($4::timestamptz IS NULL OR created_at < $4::timestamptz)
  AND ($5::timestamptz IS NULL OR (created_at, id) < ($5::timestamptz, $6::uuid))
ORDER BY created_at DESC, id DESC
LIMIT $7::bigint
