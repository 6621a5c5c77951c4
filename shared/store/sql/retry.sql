-- Retryable failures with attempts left: $1..$3 the holders (fence.rs), $4 their errors, $5
-- their delays in ms. With a lease $6 (ms) the step stays leased under the same token and
-- its message comes back; without ($6 NULL) it goes back to pending. A detached attempt's
-- endpoint is forgotten: the next claim starts a new attempt. Returns the steps written.
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::jsonb[], $5::bigint[])
        AS t(step_id, worker, fence, error, delay_ms)
),
retried AS (
    UPDATE steps s
    SET status = CASE WHEN $6::bigint IS NULL THEN 'pending' ELSE 'leased' END::rara_step_status,
        next_run_at = now() + i.delay_ms * interval '1 millisecond',
        lease_expires_at = CASE WHEN $6::bigint IS NULL THEN NULL
                                ELSE now() + (i.delay_ms + $6::bigint) * interval '1 millisecond' END,
        lease_token = CASE WHEN $6::bigint IS NULL THEN NULL ELSE s.lease_token END,
        leased_by = CASE WHEN $6::bigint IS NULL THEN NULL ELSE s.leased_by END,
        remote_endpoint = NULL, remote_sequence = NULL, error = i.error, progress = NULL, updated_at = now()
    FROM input i
    WHERE {holders}
      AND s.attempt < s.max_attempts
    RETURNING s.id, s.attempt, s.next_run_at, i.error
),
closed AS (
    UPDATE step_attempts a SET outcome = 'retrying', error = r.error, finished_at = now(), retry_at = r.next_run_at
    FROM retried r WHERE a.step_id = r.id AND a.attempt = r.attempt AND a.outcome = 'running'
)
SELECT id FROM retried
