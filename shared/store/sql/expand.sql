-- Expands map steps (DESIGN.md "Data flow", fan-out): $1..$3 the holders of the map steps
-- (fence.rs), $4 how many children each gets; the children as $5 their map step, $6 their
-- ids, $7 their indices, $8 their names and $9 their inputs (the map's input with `$item`
-- substituted). A child is a step of the run like any other, with the map's operation,
-- version, attempts, timeout, retry, concurrency key and limit, and priority (flow control
-- holds each child to its key). The map step goes back to `pending`, waiting on its
-- children (one dependency each), and its second claim gathers their outputs; it keeps one
-- attempt for that claim. Its expanding attempt closes `succeeded`. With a bound n on
-- concurrency, child i + n waits on child i, so at most n run at once. Wakes the listening
-- schedulers on $10. Returns the map steps written.
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::int[]) AS t(step_id, worker, fence, size)
),
-- The map steps as they were (every part of a statement reads the same snapshot).
before AS (
    SELECT id, max_attempts FROM steps WHERE id = ANY($1::uuid[])
),
expanded AS (
    UPDATE steps s
    SET status = 'pending', map_size = i.size, pending_deps = i.size,
        max_attempts = greatest(s.max_attempts, s.attempt + 1),
        leased_by = NULL, lease_token = NULL, lease_expires_at = NULL, next_run_at = now(), updated_at = now()
    FROM input i
    WHERE {holders} AND s.map_size IS NULL
    RETURNING s.id, s.run_id, s.attempt, s.position, s.operation, s.version, s.timeout_seconds,
              s.retry_initial_delay_ms, s.retry_max_delay_ms, s.retry_multiplier, s.map_max_concurrency, i.size,
              s.concurrency_key, s.concurrency_limit, s.priority
),
closed AS (
    UPDATE step_attempts a SET outcome = 'succeeded', finished_at = now()
    FROM expanded e WHERE a.step_id = e.id AND a.attempt = e.attempt AND a.outcome = 'running'
),
children AS (
    INSERT INTO steps (id, run_id, position, name, operation, version, input, pending_deps, max_attempts,
                       timeout_seconds, retry_initial_delay_ms, retry_max_delay_ms, retry_multiplier,
                       parent_id, map_index, concurrency_key, concurrency_limit, priority)
    SELECT c.id, e.run_id, e.position, c.name, e.operation, e.version, c.input,
           CASE WHEN c.idx >= coalesce(e.map_max_concurrency, c.idx + 1) THEN 1 ELSE 0 END,
           b.max_attempts, e.timeout_seconds, e.retry_initial_delay_ms, e.retry_max_delay_ms, e.retry_multiplier,
           e.id, c.idx, e.concurrency_key, e.concurrency_limit, e.priority
    FROM unnest($5::uuid[], $6::uuid[], $7::int[], $8::text[], $9::jsonb[]) AS c(parent, id, idx, name, input)
    JOIN expanded e ON e.id = c.parent
    JOIN before b ON b.id = e.id
    RETURNING id, parent_id, map_index, run_id, name
),
-- The children's names (migration 000017).
child_names AS (
    INSERT INTO step_names (run_id, name, step_id) SELECT run_id, name, id FROM children
),
waits AS (
    INSERT INTO step_dependencies (step_id, depends_on)
    SELECT parent_id, id FROM children
    UNION ALL
    SELECT later.id, c.id
    FROM children c
    JOIN expanded e ON e.id = c.parent_id
    JOIN children later ON later.parent_id = c.parent_id AND later.map_index = c.map_index + e.map_max_concurrency
),
runs AS (
    UPDATE workflow_runs w
    SET steps_unfinished = w.steps_unfinished + n.children, steps_total = w.steps_total + n.children,
        updated_at = now()
    FROM (SELECT run_id, sum(size)::int AS children FROM expanded GROUP BY run_id) n
    WHERE w.id = n.run_id
),
woke AS (
    SELECT pg_notify($10::text, '') WHERE EXISTS (SELECT 1 FROM expanded)
)
SELECT e.id FROM expanded e CROSS JOIN (SELECT count(*) FROM woke) w
