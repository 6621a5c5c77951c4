-- Test and benchmark history (feature `testing`): finished steps $1..$2 (exclusive) in runs of
-- $3, succeeded with one attempt each.
WITH h AS (
    SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'))::uuid AS id,
           ('00000000-0000-7000-8000-' || lpad(to_hex(i / $3::bigint), 12, '0'))::uuid AS run_id,
           's' || (i % $3::bigint) AS name, (i % $3::bigint)::int AS position
    FROM generate_series($1::bigint, $2::bigint - 1) i
),
named AS (
    INSERT INTO step_names (run_id, name, step_id) SELECT run_id, name, id FROM h
)
INSERT INTO steps (id, run_id, name, position, operation, input, status, attempt, max_attempts,
                   timeout_seconds, retry_initial_delay_ms, retry_max_delay_ms, retry_multiplier,
                   output, created_at, updated_at, finished_at)
SELECT h.id, h.run_id, h.name, h.position, 'noop', '{}', 'succeeded', 1, 3, 300, 1000, 300000, 2,
       '{}', now(), now(), now()
FROM h
