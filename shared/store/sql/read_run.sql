-- The run $1, with the run it was made from (a rerun) and the reruns made from it; a child
-- run's parent step (its run, name and attempt); the child runs its own steps made.
SELECT id, name, status AS "status: RunStatus", idempotency_key, inputs, outputs, created_at, finished_at, rerun_of,
       ARRAY(SELECT x.id FROM workflow_runs x WHERE x.rerun_of = $1::uuid ORDER BY x.created_at) AS "reruns!",
       workflow_version,
       (SELECT jsonb_build_object('run_id', p.run_id, 'step', p.name, 'attempt', r.parent_attempt)
        FROM steps p WHERE p.id = r.parent_step_id) AS parent,
       coalesce((SELECT jsonb_agg(jsonb_build_object('run_id', x.id, 'step', s.name, 'attempt', x.parent_attempt)
                                  ORDER BY x.created_at)
                 FROM steps s JOIN workflow_runs x ON x.parent_step_id = s.id
                 WHERE s.run_id = $1::uuid), '[]') AS "children!"
FROM workflow_runs r WHERE id = $1::uuid
