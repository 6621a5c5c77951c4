-- The rerun $1 of the run $2: its name and output as defined, $3 steps of which $4 run, the
-- inputs $5 (the original's with the given ones replaced), linked to the original.
INSERT INTO workflow_runs (id, name, steps_total, steps_unfinished, inputs, outputs, rerun_of)
SELECT $1::uuid, r.name, $3::int, $4::int, $5::jsonb, r.outputs, r.id FROM workflow_runs r WHERE r.id = $2::uuid
RETURNING id
