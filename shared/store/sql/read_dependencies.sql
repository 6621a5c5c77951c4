-- The dependencies of the steps of the run $1, by name, in definition order: the ones the
-- definition declares (a map step also waits on its children, and a bounded map's children on
-- each other; those are the children's `parent`, not dependencies people wrote).
SELECT d.step_id, up.name
FROM step_dependencies d
JOIN steps s ON s.id = d.step_id JOIN steps up ON up.id = d.depends_on
WHERE s.id IN (SELECT n.step_id FROM step_names n WHERE n.run_id = $1::uuid) AND up.parent_id IS NULL ORDER BY up.position
