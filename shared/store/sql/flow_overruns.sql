-- The limit invariant over the attempt history (the fault suite's checker, tests): every
-- instant an attempt started at, and the attempts of its key (or of its key's group) running
-- then, where they were more than the limit. A key's limit is the smallest of the operator's
-- limit on it and the largest `concurrency.limit` among those attempts' steps; a group's is
-- the operator's. Limits as they are now. Empty: no key ever held more than its limit.
WITH a AS (
    SELECT s.concurrency_key AS key, s.concurrency_limit, t.started_at,
           coalesce(t.finished_at, 'infinity') AS finished_at
    FROM step_attempts t JOIN steps s ON s.id = t.step_id
    WHERE s.concurrency_key IS NOT NULL
),
by_key AS (
    SELECT x.key AS name, x.started_at, count(*) AS running,
           least(max(y.concurrency_limit), (SELECT l.max_held FROM flow_limits l WHERE l.target = x.key)) AS "limit"
    FROM a x JOIN a y ON y.key = x.key AND y.started_at <= x.started_at AND y.finished_at > x.started_at
    GROUP BY x.key, x.started_at
),
by_group AS (
    SELECT g.target AS name, x.started_at, count(*) AS running, min(g.max_held) AS "limit"
    FROM flow_limits g
    JOIN a x ON right(g.target, 1) = '*' AND starts_with(x.key, left(g.target, -1))
    JOIN a y ON starts_with(y.key, left(g.target, -1)) AND y.started_at <= x.started_at AND y.finished_at > x.started_at
    WHERE g.max_held IS NOT NULL
    GROUP BY g.target, x.started_at
)
SELECT name AS "name!", started_at AS "at!", running AS "running!", "limit" AS "limit!"
FROM (SELECT * FROM by_key UNION ALL SELECT * FROM by_group) o
WHERE o.running > o."limit"
ORDER BY name, started_at
