-- The shared middle of the statements that record successes (succeed.sql, quick_succeed.sql):
-- sql.rs puts it where they write `{succeed_tail}`, after a `done` CTE with the columns (id,
-- run_id) of the steps that succeeded. It releases their dependents, wakes the listening
-- schedulers on the channel bound where `{due_channel}` stands when one became due, and
-- finishes the runs whose last step this was (`runs`: one row per run written, `finished`
-- when it ended). The statement's own final SELECT follows.
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
    SELECT pg_notify({due_channel}, '') FROM released WHERE status = 'pending' AND pending_deps = 0 LIMIT 1
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
    RETURNING w.steps_unfinished = 0 AS finished
)
