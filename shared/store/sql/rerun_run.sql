-- The rerun $1 of the run $2: its name and output as defined, $3 steps of which $4 run, the
-- inputs $5 (the original's with the given ones replaced), linked to the original, with the
-- idempotency key $6 (NULL: none). Returns nothing when the key is taken (a replay made
-- before).
INSERT INTO workflow_runs (id, name, steps_total, steps_unfinished, inputs, outputs, rerun_of, idempotency_key)
SELECT $1::uuid, r.name, $3::int, $4::int, $5::jsonb, r.outputs, r.id, $6::text FROM workflow_runs r WHERE r.id = $2::uuid
ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id
