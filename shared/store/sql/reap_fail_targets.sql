-- The reaper, second half (the targets of finish_tail.sql): up to $1 running steps on their
-- last attempt whose lease expired fail with the error $2 (not one whose attempt runs detached
-- on a remote executor: reap_release.sql gives it back for re-attaching).
    SELECT id, 'failed'::rara_step_status AS new_status, $2::jsonb AS error,
           'lease_expired'::rara_attempt_outcome AS attempt_outcome
    FROM steps
    WHERE status = 'running' AND lease_expires_at <= now() AND attempt >= max_attempts AND remote_endpoint IS NULL
    ORDER BY lease_expires_at
    LIMIT $1::bigint
    FOR UPDATE SKIP LOCKED
