-- Retention (the scheduler's maintenance pass, `rara prune`): deletes up to $2 finished runs
-- (succeeded, failed, cancelled) that finished more than $1 milliseconds before now(), oldest
-- first, with everything under them (their names and steps by the trigger of migration 000017,
-- the steps' attempts, dependencies, artifacts and waits by the trigger of migrations 000014 and
-- 000035). No step of a finished run is held,
-- so nothing the claim needs is locked; a run another transaction holds (a late counter update) is
-- skipped, never waited for. With $3 (an artifact store is configured) the runs are queued in
-- `artifact_deletions` for their objects to be deleted after. Returns how many runs and steps were deleted. The runs are deleted by
-- primary key (`= ANY(ARRAY(..))`): a join with `doomed` gets a generic plan that hashes the whole
-- table for every batch.
WITH doomed AS (
    SELECT id FROM workflow_runs
    WHERE finished_at < now() - $1::bigint * interval '1 millisecond'
      AND status <> 'running'
      -- A run that a rerun was made from stays while the rerun does: the rerun's carried steps
      -- show its attempts and artifacts, and their objects lie under its prefix. Reruns of
      -- reruns chain: the original goes in the batch after its last rerun.
      AND NOT EXISTS (SELECT 1 FROM workflow_runs r WHERE r.rerun_of = workflow_runs.id)
    ORDER BY finished_at
    LIMIT $2::bigint
    FOR UPDATE SKIP LOCKED
), deleted AS (
    DELETE FROM workflow_runs WHERE id = ANY(ARRAY(SELECT id FROM doomed))
    RETURNING id, steps_total
), queued AS (
    -- With an artifact store ($3): the runs' objects, to delete after (artifact_deletions).
    INSERT INTO artifact_deletions (run_id) SELECT id FROM deleted WHERE $3::boolean
    ON CONFLICT (run_id) DO NOTHING
)
SELECT count(*) AS "runs!", coalesce(sum(steps_total), 0)::bigint AS "steps!" FROM deleted
