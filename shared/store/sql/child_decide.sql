-- Decides the child workflow wait of the step $1 at the attempt $2 with the completion $3
-- (`{"by": "child <run>", "output" | "error": ...}`), unless something decided it first.
UPDATE waits SET completion = $3::jsonb, completed_at = now()
WHERE step_id = $1::uuid AND attempt = $2::int AND kind = 'child' AND completion IS NULL
