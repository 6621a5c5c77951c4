-- Dependency edges: the step $1[i] depends on the step $2[i].
INSERT INTO step_dependencies (step_id, depends_on) SELECT * FROM unnest($1::uuid[], $2::uuid[])
