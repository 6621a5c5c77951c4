-- A bulk retry (`POST /api/bulk/retry`): retry_step.sql for each of the steps $1 at once, one
-- statement per batch. Each failed or cancelled step that is not a map child gets a new
-- attempt budget (as many attempts again as its max_attempts) and is due at once; a map step
-- comes back with its children that did not succeed (each with a new budget); the dependents
-- they had skipped come back; their runs reopen. A step of $1 that is a map child, or that has
-- not failed or been cancelled, is left as it is. Each step that comes back waits on what comes
-- back with it (a map step on its children, a bounded map's child on the earlier one it
-- follows, a step on a dependency retried in the same batch). Returns how many steps came back.
WITH RECURSIVE target AS (
    SELECT id, run_id, map_tolerated_failures FROM steps
    WHERE id = ANY($1::uuid[]) AND (status IN ('failed', 'cancelled')) IS TRUE AND parent_id IS NULL
    ORDER BY id
    FOR UPDATE
),
again AS (
    SELECT s.id, s.status AS was, t.id AS root, t.run_id FROM steps s JOIN target t ON s.id = t.id
    UNION ALL
    SELECT c.id, c.status, t.id, t.run_id FROM steps c JOIN target t ON c.parent_id = t.id
    WHERE c.status IN ('failed', 'cancelled', 'skipped')
),
-- How many of what comes back each step that comes back waits on.
waits AS (
    SELECT d.step_id, count(*)::int AS n
    FROM step_dependencies d
    WHERE d.step_id = ANY(ARRAY(SELECT id FROM again)) AND d.depends_on = ANY(ARRAY(SELECT id FROM again))
    GROUP BY d.step_id
),
revived AS (
    UPDATE steps s
    SET status = 'pending', max_attempts = s.attempt + s.max_attempts, next_run_at = now(), error = NULL,
        finished_at = NULL, updated_at = now(), pending_deps = coalesce(w.n, 0)
    FROM again a LEFT JOIN waits w ON w.step_id = a.id
    WHERE s.id = a.id
    RETURNING s.id
),
downstream(id) AS (
    SELECT d.step_id FROM step_dependencies d JOIN revived r ON d.depends_on = r.id
    UNION
    SELECT d.step_id FROM step_dependencies d JOIN downstream x ON d.depends_on = x.id
),
-- By primary key (`= ANY(ARRAY(..))`): a join with `downstream` is planned on the estimates of
-- step_dependencies, and may walk all of steps_pkey for every batch.
unskipped AS (
    UPDATE steps s SET status = 'pending', error = NULL, finished_at = NULL, updated_at = now()
    WHERE s.id = ANY(ARRAY(SELECT id FROM downstream EXCEPT SELECT id FROM again)) AND s.status = 'skipped'
    RETURNING s.id, s.run_id
),
-- Per run: the steps back, and the failures and cancellations they no longer count. The
-- children's failures a map tolerated were never counted.
back AS (
    SELECT run_id, count(*)::int AS steps,
           count(*) FILTER (WHERE was = 'failed')::int AS failed,
           count(*) FILTER (WHERE was = 'cancelled')::int AS cancelled
    FROM again GROUP BY run_id
),
tolerated AS (
    SELECT t.run_id, sum(least(coalesce(t.map_tolerated_failures, 0), coalesce(f.n, 0)))::int AS n
    FROM target t
    LEFT JOIN (SELECT root, count(*) AS n FROM again WHERE was = 'failed' AND id <> root GROUP BY root) f
           ON f.root = t.id
    GROUP BY t.run_id
),
unskipped_runs AS (
    SELECT run_id, count(*)::int AS steps FROM unskipped GROUP BY run_id
),
reopened AS (
    UPDATE workflow_runs w
    SET status = 'running', finished_at = NULL, updated_at = now(),
        steps_unfinished = w.steps_unfinished + b.steps + coalesce(u.steps, 0),
        steps_failed = w.steps_failed - b.failed + t.n,
        steps_cancelled = w.steps_cancelled - b.cancelled
    FROM back b JOIN tolerated t ON t.run_id = b.run_id LEFT JOIN unskipped_runs u ON u.run_id = b.run_id
    WHERE w.id = b.run_id
)
SELECT (SELECT count(*) FROM revived) + (SELECT count(*) FROM unskipped) AS "revived!"
