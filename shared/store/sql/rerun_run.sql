-- The rerun $1 of the run $2: its name and output as defined, $3 steps of which $4 run, the
-- inputs $5 (the original's with the given ones replaced), linked to the original, with the
-- idempotency key $6 (NULL: none) and a deadline as far from now as the original's was from
-- its submission, made from the same registered version. Returns nothing when the key is
-- taken (a replay made before).
INSERT INTO workflow_runs (id, name, steps_total, steps_unfinished, inputs, outputs, rerun_of, idempotency_key,
                           deadline_at, workflow_version)
SELECT $1::uuid, r.name, $3::int, $4::int, $5::jsonb, r.outputs, r.id, $6::text, now() + (r.deadline_at - r.created_at),
       r.workflow_version
FROM workflow_runs r WHERE r.id = $2::uuid
ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id
