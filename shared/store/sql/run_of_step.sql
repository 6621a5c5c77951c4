-- The run of the step $1.
SELECT run_id FROM steps WHERE id = $1::uuid
