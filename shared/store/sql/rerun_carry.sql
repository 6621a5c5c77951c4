-- A rerun made from a newer registered version (`rara rerun --workflow`): in the run $1, just
-- submitted, the steps named $3 are carried over from the run $2: `succeeded` with the
-- original step's output and attempt count, `carried_from` the step whose attempts and
-- artifacts they show; their dependents wait for one dependency fewer each; the run counts
-- them finished and is linked to the original. Returns the steps carried.
WITH carried AS (
    UPDATE steps n
    SET status = 'succeeded', attempt = o.attempt, output = o.output, finished_at = o.finished_at,
        carried_from = coalesce(o.carried_from, o.id), pending_deps = 0
    FROM step_names nn
    JOIN step_names onn ON onn.run_id = $2::uuid AND onn.name = nn.name
    JOIN steps o ON o.id = onn.step_id
    WHERE nn.run_id = $1::uuid AND nn.name = ANY($3::text[]) AND n.id = nn.step_id
    RETURNING n.id
),
released AS (
    UPDATE steps d SET pending_deps = d.pending_deps - x.n
    FROM (SELECT dep.step_id, count(*)::int AS n
          FROM step_dependencies dep JOIN carried c ON dep.depends_on = c.id
          GROUP BY dep.step_id) x
    WHERE d.id = x.step_id AND x.step_id NOT IN (SELECT id FROM carried)
)
UPDATE workflow_runs SET rerun_of = $2::uuid, steps_unfinished = steps_unfinished - (SELECT count(*) FROM carried)
WHERE id = $1::uuid
RETURNING (SELECT count(*) FROM carried) AS "carried!"
