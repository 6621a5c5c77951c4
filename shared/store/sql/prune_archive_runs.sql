-- Retention with `RARA_ARCHIVE=true` (and `rara prune --archive`): `prune_runs.sql`, copying
-- each run and everything under it (steps, dependencies, attempts, artifacts) into the
-- `archived_*` tables in the same statement, so a run is either live or archived, never lost
-- nor both. Every part reads the same snapshot; the deletion of the runs' names and steps (the
-- trigger of migration 000017) and of what is under them (000035) run after the copies.
WITH doomed AS (
    SELECT id FROM workflow_runs
    WHERE finished_at < now() - $1::bigint * interval '1 millisecond'
      AND status <> 'running'
      AND NOT EXISTS (SELECT FROM workflow_runs r WHERE r.rerun_of = workflow_runs.id)
    ORDER BY finished_at
    LIMIT $2::bigint
    FOR UPDATE SKIP LOCKED
), doomed_steps AS (
    SELECT s.* FROM steps s
    WHERE s.id = ANY(ARRAY(SELECT n.step_id FROM step_names n WHERE n.run_id = ANY(ARRAY(SELECT id FROM doomed))))
), archived_runs AS (
    INSERT INTO archived_workflow_runs
    SELECT r.* FROM workflow_runs r WHERE r.id = ANY(ARRAY(SELECT id FROM doomed))
), archived_steps AS (
    INSERT INTO archived_steps SELECT * FROM doomed_steps
), archived_dependencies AS (
    INSERT INTO archived_step_dependencies
    SELECT d.* FROM step_dependencies d WHERE d.step_id = ANY(ARRAY(SELECT id FROM doomed_steps))
), archived_attempts AS (
    INSERT INTO archived_step_attempts
    SELECT a.* FROM step_attempts a WHERE a.step_id = ANY(ARRAY(SELECT id FROM doomed_steps))
), archived_artifacts AS (
    INSERT INTO archived_artifacts
    SELECT f.* FROM artifacts f WHERE f.step_id = ANY(ARRAY(SELECT id FROM doomed_steps))
), deleted AS (
    DELETE FROM workflow_runs WHERE id = ANY(ARRAY(SELECT id FROM doomed))
    RETURNING id, steps_total
), queued AS (
    -- With an artifact store ($3): the runs' objects, to delete after (artifact_deletions).
    INSERT INTO artifact_deletions (run_id) SELECT id FROM deleted WHERE $3::boolean
    ON CONFLICT (run_id) DO NOTHING
)
SELECT count(*) AS "runs!", coalesce(sum(steps_total), 0)::bigint AS "steps!" FROM deleted
