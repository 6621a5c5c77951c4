-- The run $1.
SELECT id, name, status AS "status: RunStatus", idempotency_key, inputs, outputs, created_at, finished_at,
       workflow_version
FROM workflow_runs WHERE id = $1::uuid
