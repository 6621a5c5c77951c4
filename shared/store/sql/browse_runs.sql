-- The API's and console's runs page: up to $7 runs, newest first (creation time, then id),
-- after the cursor ($5, $6: the creation time and id of the previous page's last run) unless
-- NULL, matching the search (each filter unless NULL): the status $1; the workflow name $2 and
-- registered version $8; created at or after $3 and before $4; a step that failed or was
-- cancelled with the error code $9; inputs that contain $10. The name, error and
-- inputs filters are each an EXISTS over the index that answers it (`workflow_runs_workflow`,
-- `steps_error_code`, `workflow_runs_inputs`, migration 000034): the planner reads that index
-- once for every matching run (a hashed subplan) or probes it per run walked, as it costs less.
SELECT r.id, r.name, r.status AS "status: RunStatus", r.steps_total,
       r.steps_total - r.steps_unfinished AS "steps_finished!", r.created_at, r.finished_at
FROM workflow_runs r
WHERE ($1::rara_run_status IS NULL OR r.status = $1::rara_run_status)
  AND ($2::text IS NULL OR EXISTS (SELECT 1 FROM workflow_runs w WHERE w.id = r.id AND w.name = $2::text
                                   AND ($8::int IS NULL OR w.workflow_version = $8::int)))
  AND ($3::timestamptz IS NULL OR r.created_at >= $3::timestamptz)
  AND ($4::timestamptz IS NULL OR r.created_at < $4::timestamptz)
  AND ($9::text IS NULL OR EXISTS (SELECT 1 FROM steps e WHERE e.run_id = r.id AND (e.error ->> 'code') = $9::text
                                   AND e.status IN ('failed', 'cancelled')))
  AND ($10::jsonb IS NULL OR EXISTS (SELECT 1 FROM workflow_runs i WHERE i.id = r.id AND i.inputs @> $10::jsonb))
  AND ($5::timestamptz IS NULL OR (r.created_at, r.id) < ($5::timestamptz, $6::uuid))
ORDER BY r.created_at DESC, r.id DESC
LIMIT $7::bigint
