-- The executor's batch claim: $1 step ids, $2 their lease tokens (one message each), for the
-- worker $3, holding for $4 ms. A pair claims its step when the token matches and the step
-- is leased and due (its message may have waited in a backlog: a never-claimed lease stays
-- claimable by its token until the reaper leases the step again), or running under an
-- expired lease (take over; the previous attempt closes with the error $5). One row per
-- claimed pair; a pair that did not claim is judged by claim_verdicts.sql, and only then
-- (BENCHMARKS.md "The claim without its verdicts": judging every pair in this statement cost a
-- tenth of it in every batch, where every pair normally claims).
-- A step whose attempt runs detached on a remote executor (`remote_endpoint` set: parked, or
-- its re-attached holder died) is *re-attached*: same attempt, same fence, new holder, the
-- attempt row left open; the row says where to resume (`remote_endpoint`, `remote_sequence`)
-- (when the attempt started, its deadline's start, comes from attempt_started.sql).
-- A map step (`for_each`) says which of its two claims this is: before `map_size` is set, the
-- one that expands it; after, the one that gathers its children's outputs.
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::uuid[]) WITH ORDINALITY AS t(step_id, lease_token, ord)
),
-- Each pair's row, one probe of steps_pkey per pair, driven by the batch in step order (two
-- claims of overlapping batches lock their rows in the same order, never in a cycle), and
-- judged on its newest version (a row another transaction changed while the claim waited for
-- it is re-checked against the whole predicate: the key, the token, the status). The key and
-- the token are array memberships, which can be neither merged nor hashed, so the input
-- drives whatever the statistics say (fence.rs says the same of the outcome writes): as a
-- plain join, statistics taken while every step was pending made the planner walk every
-- leased step of the table against the whole batch (batch × backlog; issue 50,
-- quick_lock.sql), and the token as an equality let it sort all of `steps` for a merge join
-- (`tests/quick_plan.rs`). No locking subquery before the update: it cost each row a lock of
-- its own, its WAL record included (2026-12-06-ordinary-path-2.md).
claimed AS (
    UPDATE steps s
    SET status = 'running', leased_by = $3::text,
        fence = CASE WHEN s.remote_endpoint IS NULL THEN nextval('rara_fence_seq') ELSE s.fence END,
        attempt = CASE WHEN s.remote_endpoint IS NULL THEN s.attempt + 1 ELSE s.attempt END,
        lease_expires_at = now() + $4::bigint * interval '1 millisecond',
        progress = CASE WHEN s.remote_endpoint IS NULL THEN NULL ELSE s.progress END, updated_at = now()
    FROM (SELECT * FROM input ORDER BY step_id) i
    WHERE s.id = ANY (ARRAY[i.step_id]) AND s.lease_token = ANY (ARRAY[i.lease_token])
      AND (s.attempt < s.max_attempts OR s.remote_endpoint IS NOT NULL)
      AND CASE s.status
              WHEN 'leased' THEN s.next_run_at <= now()
              WHEN 'running' THEN s.lease_expires_at <= now()
              ELSE false
          END
    RETURNING s.id, s.run_id, s.name, s.operation, s.version, s.input, s.attempt, s.max_attempts, s.fence,
              s.timeout_seconds, s.retry_initial_delay_ms, s.retry_max_delay_ms, s.retry_multiplier,
              s.lease_expires_at, s.lease_token, s.remote_endpoint, s.remote_sequence, now() AS attached_at,
              s.for_each, s.map_max_concurrency, s.map_size, s.map_index, s.map_tolerated_failures
),
opened AS (
    INSERT INTO step_attempts (step_id, attempt, fence, leased_by, lease_token)
    SELECT id, attempt, fence, $3::text, lease_token FROM claimed WHERE remote_endpoint IS NULL
),
-- The attempt before, when this claim takes over from a holder that died (a first attempt has
-- none to look for).
taken_over AS (
    UPDATE step_attempts a
    SET outcome = 'lease_expired', finished_at = now(), error = $5::jsonb
    FROM claimed c
    WHERE c.attempt > 1 AND a.step_id = c.id AND a.attempt = c.attempt - 1 AND a.outcome = 'running'
      AND c.remote_endpoint IS NULL
    RETURNING a.step_id
)
SELECT c.id AS "id!", c.run_id AS "run_id!", c.name AS "name!", c.operation AS "operation!",
       c.version AS "version?", c.input AS "input!", c.attempt AS "attempt!", c.max_attempts AS "max_attempts!",
       c.fence AS "fence!", c.timeout_seconds AS "timeout_seconds!",
       c.retry_initial_delay_ms AS "retry_initial_delay_ms!", c.retry_max_delay_ms AS "retry_max_delay_ms!",
       c.retry_multiplier AS "retry_multiplier!", c.lease_expires_at AS "lease_expires_at!",
       c.lease_token AS "lease_token!", (t.step_id IS NOT NULL) AS "took_over!",
       c.remote_endpoint AS "remote_endpoint?", c.remote_sequence AS "remote_sequence?", c.attached_at AS "attached_at!",
       c.for_each AS "for_each?", c.map_max_concurrency AS "map_max_concurrency?", c.map_size AS "map_size?",
       c.map_index AS "map_index?", c.map_tolerated_failures AS "map_tolerated_failures?"
FROM claimed c
LEFT JOIN taken_over t ON t.step_id = c.id
