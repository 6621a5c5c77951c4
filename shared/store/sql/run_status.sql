-- The status of the run $1 (no row: no such run).
SELECT status AS "status: RunStatus" FROM workflow_runs WHERE id = $1::uuid
