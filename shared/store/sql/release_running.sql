-- A stopping runner gives back the running steps it still holds: $1..$3 the holders
-- (fence.rs), $4 the error of the interrupted attempts, $5 the due channel. Each step is due
-- again at once for any executor (pending, its token cleared, so the old message is stale);
-- its attempt is closed as retrying and given back (max_attempts + 1). Returns the steps written.
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[]) AS t(step_id, worker, fence)
),
released AS (
    UPDATE steps s
    SET status = 'pending', next_run_at = now(), leased_by = NULL, lease_token = NULL, lease_expires_at = NULL,
        max_attempts = s.max_attempts + 1, progress = NULL, error = $4::jsonb,
        remote_endpoint = NULL, remote_sequence = NULL, updated_at = now()
    FROM input i
    WHERE {holders}
    RETURNING s.id, s.attempt
),
closed AS (
    UPDATE step_attempts a SET outcome = 'retrying', error = $4::jsonb, finished_at = now(), retry_at = now()
    FROM released r WHERE a.step_id = r.id AND a.attempt = r.attempt AND a.outcome = 'running'
),
woke AS (
    SELECT pg_notify($5::text, '') FROM released LIMIT 1
)
SELECT r.id FROM released r CROSS JOIN (SELECT count(*) FROM woke) w
