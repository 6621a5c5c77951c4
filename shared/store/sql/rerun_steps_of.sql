-- The steps of the run $1 a rerun is made from, in definition order (not a map's children:
-- their map step is carried or runs again whole): each one's status, the input and list it
-- reads run inputs from, its operation and version, and the ids of the steps it depends on.
SELECT s.id, s.name, s.status AS "status: StepStatus", s.input, s.for_each, s.operation, s.version,
       ARRAY(SELECT d.depends_on FROM step_dependencies d WHERE d.step_id = s.id) AS "depends_on!"
FROM steps s
WHERE s.id IN (SELECT n.step_id FROM step_names n WHERE n.run_id = $1::uuid) AND s.parent_id IS NULL
ORDER BY s.position
