-- The reaper, first half: up to $1 steps whose lease expired go back to pending, leased ones
-- and running ones with attempts left; a running one's attempt closes with the error $2.
-- A step whose attempt runs detached on a remote executor (`remote_endpoint` set) keeps its
-- attempt open, whatever attempts are left: the next claim re-attaches to it.
WITH expired AS (
    SELECT id, status AS was FROM steps
    WHERE status IN ('leased', 'running') AND lease_expires_at <= now()
      AND (status = 'leased' OR attempt < max_attempts OR remote_endpoint IS NOT NULL)
    ORDER BY lease_expires_at
    LIMIT $1::bigint
    FOR UPDATE SKIP LOCKED
),
back AS (
    UPDATE steps s
    SET status = 'pending', leased_by = NULL, lease_token = NULL, lease_expires_at = NULL,
        next_run_at = greatest(s.next_run_at, now()), updated_at = now(),
        error = CASE WHEN e.was = 'running' AND s.remote_endpoint IS NULL THEN $2::jsonb ELSE s.error END
    FROM expired e
    WHERE s.id = e.id
    RETURNING s.id, s.attempt, e.was, s.remote_endpoint
),
closed AS (
    UPDATE step_attempts a
    SET outcome = 'lease_expired', finished_at = now(), error = $2::jsonb
    FROM back b
    WHERE b.was = 'running' AND b.remote_endpoint IS NULL AND a.step_id = b.id AND a.attempt = b.attempt AND a.outcome = 'running'
)
SELECT count(*) FILTER (WHERE was = 'leased') AS "leased!", count(*) FILTER (WHERE was = 'running') AS "running!"
FROM back
