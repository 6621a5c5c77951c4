-- A new run: id $1, name $2, idempotency key $3, $4 steps, inputs $5 (resolved: given or
-- default), output as defined $6 (`{}`: none), trace context $7 (a fresh trace when NULL), the
-- registered version it was made from $8 (NULL: a definition given whole), the schedule $9 and
-- slot $10 it was made for (NULL: not by a schedule), its deadline $11 seconds from now (NULL:
-- none). Returns nothing when the key is taken.
INSERT INTO workflow_runs (id, name, idempotency_key, steps_total, steps_unfinished, inputs, outputs, trace_context,
                           workflow_version, schedule_id, schedule_slot, deadline_at)
VALUES ($1::uuid, $2::text, $3::text, $4::int, $4::int, $5::jsonb, $6::jsonb, coalesce($7::text, rara_new_traceparent()),
        $8::int, $9::uuid, $10::timestamptz, now() + $11::bigint * interval '1 second')
ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id
