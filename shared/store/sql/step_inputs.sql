-- Each step of the run $1 with its input as stored (secret references stay references), in
-- definition order.
SELECT id, input FROM steps
WHERE id IN (SELECT n.step_id FROM step_names n WHERE n.run_id = $1::uuid)
ORDER BY position
