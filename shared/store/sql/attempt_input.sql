-- Records the input each attempt of a batch runs with, its references substituted (secret
-- references kept as references): $1..$3 the holders (fence.rs), $4 their inputs. Returns
-- the steps written.
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::jsonb[]) AS t(step_id, worker, fence, resolved)
),
-- The holders' steps first, each by its own primary-key probe (fence.rs), then their attempts:
-- joined in one step with the attempts, the planner read `steps` whole in key order for a
-- merge with `step_attempts` whenever the statistics said no step was running (issue 50).
held AS MATERIALIZED (
    SELECT s.id, s.attempt, i.resolved FROM input i JOIN steps s ON {holders}
)
UPDATE step_attempts a SET input = h.resolved
FROM held h
WHERE a.step_id = h.id AND a.attempt = h.attempt
RETURNING a.step_id
