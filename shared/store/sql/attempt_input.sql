-- Records the input each attempt of a batch runs with, its references substituted (secret
-- references kept as references): $1..$3 the holders (fence.rs), $4 their inputs. Returns
-- the steps written.
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::jsonb[]) AS t(step_id, worker, fence, resolved)
)
UPDATE step_attempts a SET input = i.resolved
FROM input i JOIN steps s ON {holders}
WHERE a.step_id = s.id AND a.attempt = s.attempt
RETURNING a.step_id
