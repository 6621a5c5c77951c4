-- Every key and group that has a limit, holds steps, has due steps or is paused (`rara limits
-- list`): its operator limit and rate, what it holds (leased + running; a group: over its
-- keys), what is due (pending with dependencies met; a group: over its keys), and whether a
-- pause covers it. Reads steps_held_key and steps_due_key.
WITH held AS (
    SELECT concurrency_key AS key, count(*) AS n FROM steps
    WHERE status IN ('leased', 'running') AND concurrency_key IS NOT NULL
    GROUP BY concurrency_key
),
queued AS (
    SELECT concurrency_key AS key, count(*) AS n FROM steps
    WHERE status = 'pending' AND pending_deps = 0 AND wait IS NULL AND concurrency_key IS NOT NULL
    GROUP BY concurrency_key
),
names AS (
    SELECT target AS name FROM flow_limits
    UNION SELECT key FROM held
    UNION SELECT key FROM queued
    UNION SELECT target FROM flow_pauses WHERE kind = 'key'
)
SELECT n.name AS "name!", l.max_held, l.rate_count, l.rate_period_ms,
       (SELECT coalesce(sum(h.n), 0) FROM held h
        WHERE h.key = n.name OR (right(n.name, 1) = '*' AND starts_with(h.key, left(n.name, -1))))::bigint AS "held!",
       (SELECT coalesce(sum(q.n), 0) FROM queued q
        WHERE q.key = n.name OR (right(n.name, 1) = '*' AND starts_with(q.key, left(n.name, -1))))::bigint AS "queued!",
       EXISTS (SELECT 1 FROM flow_pauses p
               WHERE p.kind = 'key'
                 AND (p.target = n.name OR (right(p.target, 1) = '*' AND starts_with(n.name, left(p.target, -1)))))
           AS "paused!"
FROM names n
LEFT JOIN flow_limits l ON l.target = n.name
ORDER BY n.name
