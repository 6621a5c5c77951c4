-- Whether the run $1 exists.
SELECT EXISTS (SELECT 1 FROM workflow_runs WHERE id = $1::uuid) AS "exists!"
