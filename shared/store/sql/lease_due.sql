-- The scheduler's lease: up to $1 due steps, oldest first, for the holder $2, for $3 ms.
-- Reads the partial index steps_due (`make explain`).
WITH due AS (
    SELECT id FROM steps
    WHERE status = 'pending' AND pending_deps = 0 AND next_run_at <= now()
    ORDER BY next_run_at
    LIMIT $1::bigint
    FOR UPDATE SKIP LOCKED
)
UPDATE steps s
SET status = 'leased', leased_by = $2::text, lease_token = gen_random_uuid(),
    lease_expires_at = now() + $3::bigint * interval '1 millisecond', updated_at = now()
FROM due
WHERE s.id = due.id
RETURNING s.id AS step_id, s.run_id, s.lease_token AS "lease_token!"
