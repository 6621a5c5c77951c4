-- Quick steps that succeeded, in the transaction that locked them (quick_lock.sql): $1 step
-- ids, $2 their lease tokens, $3 the fences the lock drew, $4 outputs, for the worker $5, the
-- attempts started at $6. The step's one write after its lease: the claim's conditions (the
-- token, `leased`; the lock held since they were read keeps them true) and the success at
-- once, with the attempt's row written once, finished. The transaction began with the lock,
-- so `now()` is when the attempt started: the step finishes at `clock_timestamp()`. Then
-- succeed_release.sql, its channel $7, and succeed_tail.sql (sql.rs); for a batch none of whose
-- steps has dependents, succeed_tail.sql alone (QUICK_SUCCEED_LEAVES, without $7).
--
-- The commit does not wait for the WAL flush unless a run ended (DESIGN.md "Quick steps",
-- durability): `SET LOCAL synchronous_commit = off`, by `set_config` in `durability`. A
-- crash of Postgres within about 3 × `wal_writer_delay` of the commit may lose these
-- successes, all together with their attempts and counters; the steps are then leased again,
-- and the reaper re-enqueues them, to run again (a quick executor allows it). Whatever
-- follows from them commits later with a flush that covers them: a released dependent's
-- lease, a run's end (this statement keeps the flush when a run ended).
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::bigint[], $4::jsonb[]) AS t(step_id, lease_token, fence, output)
),
-- Each step's row, one probe of steps_pkey per pair (never flattened: LIMIT), then the update
-- by its ctid: linear in the batch whatever the statistics say (quick_lock.sql, issue 50).
-- The rows are locked by this transaction since quick_lock.sql, so the ctid read here is the
-- row the update writes.
target AS (
    SELECT i.*, r.row FROM input i
    CROSS JOIN LATERAL (
        SELECT s.ctid AS row FROM steps s
        WHERE s.id = i.step_id AND s.lease_token = i.lease_token AND (s.status = 'leased') IS TRUE
        LIMIT 1
    ) r
),
done AS (
    UPDATE steps s
    SET status = 'succeeded', output = i.output, error = NULL, attempt = s.attempt + 1, fence = i.fence,
        leased_by = NULL, lease_token = NULL, lease_expires_at = NULL, progress = NULL,
        finished_at = clock_timestamp(), updated_at = now()
    FROM target i
    WHERE s.ctid = i.row
    RETURNING s.id, s.run_id, s.attempt, s.fence, i.lease_token, s.finished_at
),
opened AS (
    INSERT INTO step_attempts (step_id, attempt, fence, leased_by, lease_token, outcome, started_at, finished_at)
    SELECT id, attempt, fence, $5::text, lease_token, 'succeeded', $6::timestamptz, finished_at FROM done
),
{succeed_tail},
durability AS (
    SELECT set_config('synchronous_commit', 'off', true) WHERE NOT EXISTS (SELECT FROM runs WHERE finished)
)
SELECT d.id FROM done d CROSS JOIN (SELECT count(*) FROM woke) w CROSS JOIN (SELECT count(*) FROM durability) c
