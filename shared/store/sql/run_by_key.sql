-- The run submitted under the idempotency key $1, and whether it was submitted with the
-- inputs $2 (jsonb equality: key order and number spelling do not matter).
SELECT id, inputs = $2::jsonb AS "same_inputs!" FROM workflow_runs WHERE idempotency_key = $1::text
