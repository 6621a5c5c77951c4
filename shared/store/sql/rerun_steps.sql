-- The steps of the rerun $1, one per step $2 of the original (new ids $3): where $4 says it is
-- carried over, `succeeded` with the original's output and attempt count, `carried_from` the
-- step whose attempts and artifacts it shows (the first run's, across reruns of reruns); else
-- `pending` from its first attempt, waiting for $5 of its dependencies (those that run
-- again). Its definition (operation, input, retries, map, flow, wait) is the original's; its
-- name and dependencies are the same, between the new ids.
WITH m AS (
    SELECT * FROM unnest($2::uuid[], $3::uuid[], $4::bool[], $5::int[]) AS m(old_id, new_id, carried, pending_deps)
),
named AS (
    INSERT INTO step_names (run_id, name, step_id)
    SELECT $1::uuid, s.name, m.new_id FROM m JOIN steps s ON s.id = m.old_id
),
dependencies AS (
    INSERT INTO step_dependencies (step_id, depends_on)
    SELECT a.new_id, b.new_id
    FROM step_dependencies d JOIN m a ON a.old_id = d.step_id JOIN m b ON b.old_id = d.depends_on
)
INSERT INTO steps (id, run_id, position, name, operation, version, input, pending_deps, max_attempts,
                   timeout_seconds, retry_initial_delay_ms, retry_max_delay_ms, retry_multiplier, for_each,
                   map_max_concurrency, map_tolerated_failures, concurrency_key, concurrency_limit, priority,
                   wait, status, attempt, output, finished_at, carried_from)
SELECT m.new_id, $1::uuid, s.position, s.name, s.operation, s.version, s.input,
       CASE WHEN m.carried THEN 0 ELSE m.pending_deps END, s.max_attempts, s.timeout_seconds,
       s.retry_initial_delay_ms, s.retry_max_delay_ms, s.retry_multiplier, s.for_each, s.map_max_concurrency,
       s.map_tolerated_failures, s.concurrency_key, s.concurrency_limit, s.priority, s.wait,
       CASE WHEN m.carried THEN 'succeeded' ELSE 'pending' END::rara_step_status,
       CASE WHEN m.carried THEN s.attempt ELSE 0 END,
       CASE WHEN m.carried THEN s.output END,
       CASE WHEN m.carried THEN s.finished_at END,
       CASE WHEN m.carried THEN coalesce(s.carried_from, s.id) END
FROM m JOIN steps s ON s.id = m.old_id
