-- `rara retry`: gives the failed or cancelled step $1 a new attempt budget (as many attempts
-- again as its max_attempts), brings back the dependents it had skipped, and reopens its run.
-- A map step comes back with its children that did not succeed (each with a new budget), and
-- waits on them again; a map child is retried through its map step (returned as `map`, and
-- nothing changes). Returns how many steps came back.
WITH RECURSIVE target AS (
    SELECT id, run_id, map_tolerated_failures FROM steps
    WHERE id = $1::uuid AND status IN ('failed', 'cancelled') AND parent_id IS NULL
    FOR UPDATE
),
again AS (
    SELECT s.id, s.status AS was FROM steps s JOIN target t ON s.id = t.id
    UNION ALL
    SELECT c.id, c.status FROM steps c JOIN target t ON c.parent_id = t.id
    WHERE c.status IN ('failed', 'cancelled', 'skipped')
),
-- Each waits on what comes back with it: a map step on its children, a bounded map's child
-- on the earlier one it follows; a step that ran had every dependency succeeded.
revived AS (
    UPDATE steps s
    SET status = 'pending', max_attempts = s.attempt + s.max_attempts, next_run_at = now(), error = NULL,
        finished_at = NULL, updated_at = now(),
        pending_deps = (SELECT count(*) FROM step_dependencies d JOIN again a ON a.id = d.depends_on
                        WHERE d.step_id = s.id)
    FROM again a WHERE s.id = a.id
    RETURNING s.id, s.run_id
),
downstream(id) AS (
    SELECT d.step_id FROM step_dependencies d JOIN revived r ON d.depends_on = r.id
    UNION
    SELECT d.step_id FROM step_dependencies d JOIN downstream x ON d.depends_on = x.id
),
unskipped AS (
    UPDATE steps s SET status = 'pending', error = NULL, finished_at = NULL, updated_at = now()
    FROM downstream x
    WHERE s.id = x.id AND s.status = 'skipped' AND s.id NOT IN (SELECT id FROM again)
    RETURNING s.id
),
reopened AS (
    UPDATE workflow_runs w
    SET status = 'running', finished_at = NULL, updated_at = now(),
        steps_unfinished = w.steps_unfinished + (SELECT count(*) FROM again)::int + (SELECT count(*) FROM unskipped)::int,
        -- The children's failures the map tolerated were never counted.
        steps_failed = w.steps_failed - (SELECT count(*) FROM again WHERE was = 'failed')::int
            + least(coalesce(t.map_tolerated_failures, 0),
                    (SELECT count(*) FROM again WHERE was = 'failed' AND id <> t.id))::int,
        steps_cancelled = w.steps_cancelled - (SELECT count(*) FROM again WHERE was = 'cancelled')::int
    FROM target t WHERE w.id = t.run_id
)
SELECT (SELECT count(*) FROM revived) + (SELECT count(*) FROM unskipped) AS "revived!",
       (SELECT m.name FROM steps c JOIN steps m ON m.id = c.parent_id WHERE c.id = $1::uuid) AS map
