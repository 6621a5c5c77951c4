-- The run $1, with the run it was made from (a rerun) and the reruns made from it.
SELECT id, name, status AS "status: RunStatus", idempotency_key, inputs, outputs, created_at, finished_at, rerun_of,
       ARRAY(SELECT x.id FROM workflow_runs x WHERE x.rerun_of = $1::uuid ORDER BY x.created_at) AS "reruns!",
       workflow_version
FROM workflow_runs WHERE id = $1::uuid
