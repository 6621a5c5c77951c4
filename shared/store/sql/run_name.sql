-- The workflow name of the run $1 (the executor's grant check, cached per run).
SELECT name FROM workflow_runs WHERE id = $1::uuid
