-- The dependencies of the steps of the run $1, by name, in definition order.
SELECT d.step_id, up.name
FROM step_dependencies d
JOIN steps s ON s.id = d.step_id JOIN steps up ON up.id = d.depends_on
WHERE s.run_id = $1::uuid ORDER BY up.position
