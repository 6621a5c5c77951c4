-- The steps of the run $2, one array element each: $1 ids, $3 positions, $4 names, $5
-- operations, $6 versions, $7 inputs, $8 unfinished dependencies, $9 max attempts, $10
-- timeouts (s), $11 initial and $12 maximum retry delays (ms), $13 retry multipliers, $14 the
-- lists of map steps (`for_each`, NULL for other steps), $15 their bounds on concurrency, $16
-- the failures of their children they tolerate, $17 the concurrency keys (NULL: none) with
-- $18 their limits, $19 the priorities, and $20 the waits (`steps.wait`, NULL for a step that
-- runs an operation).
WITH t AS (
    SELECT * FROM unnest($1::uuid[], $3::int[], $4::text[], $5::text[], $6::text[], $7::jsonb[], $8::int[],
                $9::int[], $10::int[], $11::bigint[], $12::bigint[], $13::float8[], $14::jsonb[], $15::int[],
                $16::int[], $17::text[], $18::int[], $19::int[], $20::jsonb[])
         AS t(id, position, name, operation, version, input, pending_deps,
              max_attempts, timeout_seconds, initial_ms, max_ms, multiplier, for_each, max_concurrency,
              tolerated_failures, concurrency_key, concurrency_limit, priority, wait)
),
-- The names, unique in the run (migration 000017): a second step of one name fails the
-- submission with `steps_name_unique_in_run`.
named AS (
    INSERT INTO step_names (run_id, name, step_id) SELECT $2::uuid, t.name, t.id FROM t
)
INSERT INTO steps (id, run_id, position, name, operation, version, input, pending_deps,
                   max_attempts, timeout_seconds, retry_initial_delay_ms, retry_max_delay_ms,
                   retry_multiplier, for_each, map_max_concurrency, map_tolerated_failures,
                   concurrency_key, concurrency_limit, priority, wait)
SELECT t.id, $2::uuid, t.position, t.name, t.operation, t.version, t.input, t.pending_deps,
       t.max_attempts, t.timeout_seconds, t.initial_ms, t.max_ms, t.multiplier, t.for_each, t.max_concurrency,
       t.tolerated_failures, t.concurrency_key, t.concurrency_limit, t.priority, t.wait
FROM t
