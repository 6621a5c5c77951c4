-- The run submitted under the idempotency key $1.
SELECT id FROM workflow_runs WHERE idempotency_key = $1::text
