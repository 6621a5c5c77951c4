-- Why the pairs ($1 step ids, $2 their lease tokens) that claim.sql did not claim were not
-- claimed, one row per pair, in order: the step is unknown, finished, leased under another
-- token, running under a lease that expired on its last attempt (the reaper's now: the
-- claim's own conditions, so that a lease that ended between the two statements is not
-- taken for it), or held (by a live holder, or its retry is not due yet: `held_ms` until that
-- hold ends; else $3, the claim lease). Read after the claim, so it judges the step as it is
-- now; every stale verdict is as true then as at the claim (a token or a finished step does
-- not come back).
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::uuid[]) WITH ORDINALITY AS t(step_id, lease_token, ord)
)
SELECT CASE
           WHEN s.id IS NULL THEN 'unknown'
           WHEN s.status IN ('succeeded', 'failed', 'cancelled', 'skipped') THEN 'finished'
           WHEN s.lease_token IS DISTINCT FROM i.lease_token THEN 'token_mismatch'
           WHEN (s.status = 'running') IS TRUE AND s.lease_expires_at <= now()
                AND s.attempt >= s.max_attempts AND s.remote_endpoint IS NULL THEN 'lease_expired'
           ELSE 'held'
       END AS "verdict!",
       CASE
           WHEN (s.status = 'leased') IS TRUE AND s.next_run_at > now()
               THEN (extract(epoch FROM s.next_run_at - now()) * 1000)::bigint
           WHEN (s.status = 'running') IS TRUE AND s.lease_expires_at > now()
               THEN (extract(epoch FROM s.lease_expires_at - now()) * 1000)::bigint
           ELSE $3::bigint
       END AS "held_ms!"
FROM input i
LEFT JOIN steps s ON s.id = i.step_id
ORDER BY i.ord
