-- Lets the holder $1..$3 (fence.rs) of a child workflow step wait for its child run $4, a run of
-- the workflow $5 made in the same transaction: the step `waiting`, its lease cleared (its
-- attempt stays open, as a wait's does), its row in `waits` of kind `child` naming the child
-- (replacing an earlier attempt's), the child run linked to the step and its attempt. Returns
-- the step's attempt; no row: the lease was lost (and the caller rolls the child back).
WITH held AS (
    UPDATE steps s
    SET status = 'waiting', leased_by = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = now()
    WHERE {holder}
    RETURNING s.id, s.run_id, s.attempt
),
linked AS (
    UPDATE workflow_runs r SET parent_step_id = h.id, parent_attempt = h.attempt
    FROM held h WHERE r.id = $4::uuid
)
INSERT INTO waits AS w (step_id, run_id, attempt, kind, name, key, due_at, token, child_run_id)
SELECT h.id, h.run_id, h.attempt, 'child', $5::text, $4::uuid::text, NULL,
       replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), $4::uuid
FROM held h
ON CONFLICT (step_id) DO UPDATE
SET run_id = excluded.run_id, attempt = excluded.attempt, kind = excluded.kind, name = excluded.name,
    key = excluded.key, due_at = NULL, token = excluded.token, started_at = now(),
    completion = NULL, completed_at = NULL, child_run_id = excluded.child_run_id
RETURNING w.attempt
