-- The inputs of the run $1 as submit resolved them (no row: no such run).
SELECT inputs FROM workflow_runs WHERE id = $1::uuid
