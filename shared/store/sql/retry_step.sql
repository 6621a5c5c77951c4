-- `rara retry`: gives the failed or cancelled step $1 a new attempt budget (as many attempts
-- again as its max_attempts), brings back the dependents it had skipped, and reopens its run.
-- Returns how many steps came back.
WITH RECURSIVE target AS (
    SELECT id, run_id, status AS was FROM steps
    WHERE id = $1::uuid AND status IN ('failed', 'cancelled')
    FOR UPDATE
),
revived AS (
    UPDATE steps s
    SET status = 'pending', max_attempts = s.attempt + s.max_attempts, next_run_at = now(), error = NULL,
        finished_at = NULL, updated_at = now()
    FROM target t WHERE s.id = t.id
    RETURNING s.id, s.run_id
),
downstream(id) AS (
    SELECT d.step_id FROM step_dependencies d JOIN revived r ON d.depends_on = r.id
    UNION
    SELECT d.step_id FROM step_dependencies d JOIN downstream x ON d.depends_on = x.id
),
unskipped AS (
    UPDATE steps s SET status = 'pending', error = NULL, finished_at = NULL, updated_at = now()
    FROM downstream x WHERE s.id = x.id AND s.status = 'skipped'
    RETURNING s.id
),
reopened AS (
    UPDATE workflow_runs w
    SET status = 'running', finished_at = NULL, updated_at = now(),
        steps_unfinished = w.steps_unfinished + 1 + (SELECT count(*) FROM unskipped)::int,
        steps_failed = w.steps_failed - (CASE WHEN t.was = 'failed' THEN 1 ELSE 0 END),
        steps_cancelled = w.steps_cancelled - (CASE WHEN t.was = 'cancelled' THEN 1 ELSE 0 END)
    FROM target t WHERE w.id = t.run_id
)
SELECT (SELECT count(*) FROM revived) + (SELECT count(*) FROM unskipped) AS "revived!"
