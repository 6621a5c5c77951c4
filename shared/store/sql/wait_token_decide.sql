-- Decides the wait whose completion token is $1 with the payload $2 as its step's output (the
-- step locked by wait_token.sql). Returns its step, or nothing when something decided it first.
UPDATE waits w SET completion = jsonb_build_object('by', 'completion token', 'output', $2::jsonb), completed_at = now()
WHERE w.token = $1::text AND w.completion IS NULL
RETURNING w.step_id
