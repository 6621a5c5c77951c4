-- The run submitted under the idempotency key $1, and whether it was submitted with the
-- inputs $2 (jsonb equality: key order and number spelling do not matter; inputs offloaded to the
-- artifact store, `{"$stored": {…}}`, are the same when their digests are).
SELECT id, (inputs = $2::jsonb OR (inputs ? '$stored' AND $2::jsonb ? '$stored'
                                   AND inputs -> '$stored' -> 'digest' = $2::jsonb -> '$stored' -> 'digest'))
           AS "same_inputs!"
FROM workflow_runs WHERE idempotency_key = $1::text
