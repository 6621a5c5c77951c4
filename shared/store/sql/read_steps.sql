-- The steps of the run $1, in definition order; a map step's children right after it, in
-- element order.
SELECT id, name, operation, version, status AS "status: StepStatus", attempt, max_attempts, next_run_at,
       leased_by, lease_expires_at, fence, progress AS "progress: Json<Progress>", output,
       error AS "error: Json<StepError>", finished_at, remote_endpoint, parent_id, map_index, map_size, carried_from
FROM steps WHERE id IN (SELECT n.step_id FROM step_names n WHERE n.run_id = $1::uuid) ORDER BY position, map_index NULLS FIRST
