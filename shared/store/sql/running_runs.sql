-- What a bulk cancel touches: the ids of the unfinished runs in the status $1, named $2,
-- created at or after $3 and before $4 (each unless NULL), oldest first.
SELECT id FROM workflow_runs
WHERE status = 'running'
  AND ($1::rara_run_status IS NULL OR status = $1::rara_run_status)
  AND ($2::text IS NULL OR name = $2::text)
  AND ($3::timestamptz IS NULL OR created_at >= $3::timestamptz)
  AND ($4::timestamptz IS NULL OR created_at < $4::timestamptz)
ORDER BY created_at
