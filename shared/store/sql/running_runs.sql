-- What a bulk cancel touches: the ids of the unfinished runs matching the search (each filter
-- unless NULL; as in browse_runs.sql): the status $1, the workflow name $2 and version $5,
-- created at or after $3 and before $4, a step that failed or was cancelled with the error code $6, inputs that
-- contain $7; oldest first.
SELECT r.id FROM workflow_runs r
WHERE r.status = 'running'
  AND ($1::rara_run_status IS NULL OR r.status = $1::rara_run_status)
  AND ($2::text IS NULL OR EXISTS (SELECT 1 FROM workflow_runs w WHERE w.id = r.id AND w.name = $2::text
                                   AND ($5::int IS NULL OR w.workflow_version = $5::int)))
  AND ($3::timestamptz IS NULL OR r.created_at >= $3::timestamptz)
  AND ($4::timestamptz IS NULL OR r.created_at < $4::timestamptz)
  AND ($6::text IS NULL OR EXISTS (SELECT 1 FROM steps e WHERE e.run_id = r.id AND (e.error ->> 'code') = $6::text
                                   AND e.status IN ('failed', 'cancelled')))
  AND ($7::jsonb IS NULL OR EXISTS (SELECT 1 FROM workflow_runs i WHERE i.id = r.id AND i.inputs @> $7::jsonb))
ORDER BY r.created_at
