-- What a bulk replay touches: the finished runs matching the search (each filter unless NULL;
-- as in browse_runs.sql): the status $1, the workflow name $2 and version $6, created at or
-- after $3 and before $4, a step that failed or was cancelled with the error code $7, inputs that contain $8;
-- oldest first, at most $5. Each with whether it was replayed already (a run holds the
-- idempotency key `replay:<its id>`: one probe of the key's unique index) and its first failed
-- step in definition order (through `steps_retryable`; NULL: none failed).
SELECT r.id AS "id!",
       EXISTS (SELECT 1 FROM workflow_runs x WHERE x.idempotency_key = 'replay:' || r.id::text) AS "replayed!",
       (SELECT s.name FROM steps s
        WHERE r.id = s.run_id AND s.status = 'failed' AND s.parent_id IS NULL
        ORDER BY s.position LIMIT 1) AS first_failed
FROM workflow_runs r
WHERE r.status <> 'running'
  AND ($1::rara_run_status IS NULL OR r.status = $1::rara_run_status)
  AND ($2::text IS NULL OR EXISTS (SELECT 1 FROM workflow_runs w WHERE w.id = r.id AND w.name = $2::text
                                   AND ($6::int IS NULL OR w.workflow_version = $6::int)))
  AND ($3::timestamptz IS NULL OR r.created_at >= $3::timestamptz)
  AND ($4::timestamptz IS NULL OR r.created_at < $4::timestamptz)
  AND ($7::text IS NULL OR EXISTS (SELECT 1 FROM steps e WHERE e.run_id = r.id AND (e.error ->> 'code') = $7::text
                                   AND e.status IN ('failed', 'cancelled')))
  AND ($8::jsonb IS NULL OR EXISTS (SELECT 1 FROM workflow_runs i WHERE i.id = r.id AND i.inputs @> $8::jsonb))
ORDER BY r.created_at
LIMIT $5::bigint
