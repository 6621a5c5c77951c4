-- Quick steps (DESIGN.md "Quick steps"): of the batch's pairs, $1 step ids and $2 their lease
-- tokens, lock (FOR UPDATE, in the transaction that will record them) the steps that the
-- ordinary claim would claim afresh: leased under the message's token, due, with attempts
-- left, not detached, not a map step; and whose operation is one of $3, the quick in-process
-- executors. Each gets the fence of its attempt now. A step another transaction holds is
-- skipped (the ordinary claim judges it after this transaction ends); so is every pair this
-- statement leaves out. `locked_at`: when the attempt starts (the database's clock).
-- `leaves`: whether no step depends on any of the requested steps, one index scan for the
-- batch (a step's dependencies are written with it, at submission or expansion, so this does
-- not change while it is leased); such a batch is recorded without looking for dependents
-- (sql.rs, QUICK_SUCCEED_LEAVES).
--
-- Each pair is one probe of steps_pkey, whatever the statistics say (issue 50): as a plain
-- join, statistics taken while every step was pending (autovacuum off, or not yet run) make
-- `status = 'leased'` look like one row, and the planner walked every leased step of the
-- table against the whole batch (batch × backlog: 4 s for 1,000 steps behind 20,000). The
-- lateral subquery with its locking clause is never flattened, so the batch drives.
SELECT s.id AS "id!", s.lease_token AS "lease_token!", s.run_id AS "run_id!", s.operation AS "operation!",
       s.version AS "version?", s.input AS "input!", s.attempt + 1 AS "attempt!", s.map_index AS "map_index?",
       nextval('rara_fence_seq') AS "fence!", now() AS "locked_at!",
       NOT EXISTS (SELECT FROM step_dependencies d WHERE d.depends_on = ANY($1::uuid[])) AS "leaves!"
FROM unnest($1::uuid[], $2::uuid[]) AS i(step_id, lease_token)
CROSS JOIN LATERAL (
    SELECT s.* FROM steps s
    WHERE s.id = i.step_id AND s.lease_token = i.lease_token
      AND (s.status = 'leased') IS TRUE AND s.next_run_at <= now() AND s.attempt < s.max_attempts
      AND s.remote_endpoint IS NULL AND s.for_each IS NULL AND s.operation = ANY($3::text[])
    FOR UPDATE SKIP LOCKED
) s
