-- What a bulk retry touches: the failed or cancelled steps (map children included) of the
-- runs in the status $1, named $2, created at or after $3 and before $4 (each unless NULL),
-- by run (oldest first), then in definition order. The steps are found by run through the
-- partial index `steps_retryable` (migration 000018), which holds only failed and cancelled
-- steps: never a scan of `steps`.
SELECT s.id FROM steps s JOIN workflow_runs r ON r.id = s.run_id
WHERE s.status IN ('failed', 'cancelled')
  AND ($1::rara_run_status IS NULL OR r.status = $1::rara_run_status)
  AND ($2::text IS NULL OR r.name = $2::text)
  AND ($3::timestamptz IS NULL OR r.created_at >= $3::timestamptz)
  AND ($4::timestamptz IS NULL OR r.created_at < $4::timestamptz)
ORDER BY r.created_at, s.position
