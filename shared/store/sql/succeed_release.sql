-- The dependents of the steps that succeeded (the `done` CTE: id, run_id), released: sql.rs
-- puts this before succeed_tail.sql in the statements that record successes (succeed.sql,
-- quick_succeed.sql), unless none of the steps has dependents (then `woke` is empty). A
-- dependent that became due wakes the listening schedulers on the channel bound where
-- `{due_channel}` stands.
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
