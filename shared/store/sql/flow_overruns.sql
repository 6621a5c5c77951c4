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
-- The instants attempts started at, per key.
instants AS (
    SELECT DISTINCT key, started_at FROM a
),
by_key AS (
    SELECT i.key AS name, i.started_at, count(*) AS running,
           least(max(y.concurrency_limit), (SELECT l.max_held FROM flow_limits l WHERE l.target = i.key)) AS "limit"
    FROM instants i JOIN a y ON y.key = i.key AND y.started_at <= i.started_at AND y.finished_at > i.started_at
    GROUP BY i.key, i.started_at
),
-- The instants attempts started at, per group with a limit.
group_instants AS (
    SELECT DISTINCT g.target, g.max_held, x.started_at
    FROM flow_limits g JOIN a x ON right(g.target, 1) = '*' AND starts_with(x.key, left(g.target, -1))
    WHERE g.max_held IS NOT NULL
),
by_group AS (
    SELECT i.target AS name, i.started_at, count(*) AS running, min(i.max_held) AS "limit"
    FROM group_instants i
    JOIN a y ON starts_with(y.key, left(i.target, -1)) AND y.started_at <= i.started_at AND y.finished_at > i.started_at
    GROUP BY i.target, i.started_at
)
SELECT name AS "name!", started_at AS "at!", running AS "running!", "limit" AS "limit!"
FROM (SELECT * FROM by_key UNION ALL SELECT * FROM by_group) o
WHERE o.running > o."limit"
ORDER BY name, started_at
