-- The shared end of the statements that record successes (succeed.sql, quick_succeed.sql):
-- sql.rs puts it where they write `{succeed_tail}`, after a `done` CTE with the columns (id,
-- run_id) of the steps that succeeded and after succeed_release.sql (their dependents
-- released, `woke`). It finishes the runs whose last step this was (`runs`: one row per run
-- written, `finished` when it ended). The statement's own final SELECT follows.
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
