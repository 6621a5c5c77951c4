-- Successes of a batch: $1..$3 the holders (fence.rs), $4 their outputs; closes their
-- attempts. Then succeed_tail.sql (sql.rs puts it in): releases the dependents, wakes
-- listening schedulers on the channel $5 when one became due, and finishes the runs whose
-- last step this was. Returns the steps written.
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::jsonb[]) AS t(step_id, worker, fence, output)
),
done AS (
    UPDATE steps s
    SET status = 'succeeded', output = i.output, error = NULL, leased_by = NULL, lease_token = NULL,
        lease_expires_at = NULL, finished_at = now(), updated_at = now()
    FROM input i
    WHERE {holders}
    RETURNING s.id, s.run_id, s.attempt
),
closed AS (
    UPDATE step_attempts a SET outcome = 'succeeded', finished_at = now()
    FROM done d WHERE a.step_id = d.id AND a.attempt = d.attempt AND a.outcome = 'running'
),
{succeed_tail}
SELECT d.id FROM done d CROSS JOIN (SELECT count(*) FROM woke) w
