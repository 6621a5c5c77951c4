-- Successes of a batch: $1..$3 the holders (fence.rs), $4 their outputs. Releases the
-- dependents, wakes listening schedulers on the channel $5 when one became due, and finishes
-- the runs whose last step this was. Returns the steps written.
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
released AS (
    UPDATE steps s SET pending_deps = s.pending_deps - r.n, updated_at = now()
    FROM (SELECT dep.step_id, count(*)::int AS n
          FROM step_dependencies dep JOIN done d ON dep.depends_on = d.id
          GROUP BY dep.step_id) r
    WHERE s.id = r.step_id
    RETURNING s.status, s.pending_deps
),
-- A dependent that became due wakes the listening schedulers (delivered at commit).
woke AS (
    SELECT pg_notify($5::text, '') FROM released WHERE status = 'pending' AND pending_deps = 0 LIMIT 1
),
runs AS (
    UPDATE workflow_runs w
    SET steps_unfinished = w.steps_unfinished - f.n,
        status = CASE
            WHEN w.steps_unfinished - f.n > 0 THEN w.status
            WHEN w.steps_failed > 0 THEN 'failed'
            WHEN w.steps_cancelled > 0 THEN 'cancelled'
            ELSE 'succeeded' END::rara_run_status,
        finished_at = CASE WHEN w.steps_unfinished - f.n = 0 THEN now() END,
        updated_at = now()
    FROM (SELECT run_id, count(*)::int AS n FROM done GROUP BY run_id) f
    WHERE w.id = f.run_id
)
SELECT d.id FROM done d CROSS JOIN (SELECT count(*) FROM woke) w
