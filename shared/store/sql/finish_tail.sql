-- The shared tail of every statement that finishes steps other than by success, composed as
-- `WITH RECURSIVE targets AS (<targets>), <this>` (outcome.rs). It expects a `targets` CTE
-- with columns (id, new_status, error, attempt_outcome) whose rows are locked (FOR UPDATE),
-- so its conditions hold when the rows change. The dependents it skips get the error bound
-- as the parameter after the targets' own (written `{dependency_failed}` below).
finished AS (
    UPDATE steps s
    SET status = t.new_status, error = t.error, leased_by = NULL, lease_token = NULL,
        lease_expires_at = NULL, finished_at = now(), updated_at = now()
    FROM targets t
    WHERE s.id = t.id
    RETURNING s.id, s.run_id, s.attempt, s.status, s.parent_id, t.error, t.attempt_outcome
),
-- The failures of map children their map tolerates (`map_tolerated_failures`): its children
-- that failed earlier (all tolerated, or the map would not be pending) and these, in order,
-- within the bound.
tolerated AS (
    SELECT f.id
    FROM (SELECT id, parent_id, row_number() OVER (PARTITION BY parent_id ORDER BY id) AS nth
          FROM finished WHERE status = 'failed' AND parent_id IS NOT NULL) f
    JOIN steps m ON m.id = f.parent_id
    WHERE m.status = 'pending' AND m.map_tolerated_failures IS NOT NULL
      AND (SELECT count(*) FROM steps c WHERE c.parent_id = m.id AND c.status = 'failed') + f.nth
          <= m.map_tolerated_failures
),
-- A wait that ends so (cancelled, or failed by its own decision) is decided now if it was not,
-- so that the scheduler forgets it (wait_forget.sql) and traces it: one probe of waits_pkey
-- per finished step.
ended_waits AS (
    UPDATE waits w
    SET completion = jsonb_build_object('by', f.attempt_outcome::text, 'error', f.error), completed_at = now()
    FROM finished f
    WHERE w.step_id = f.id AND w.attempt = f.attempt AND w.completion IS NULL
),
closed AS (
    UPDATE step_attempts a
    SET outcome = f.attempt_outcome, error = f.error, finished_at = now()
    FROM finished f
    WHERE a.step_id = f.id AND a.attempt = f.attempt AND a.outcome = 'running'
),
downstream(id) AS (
    SELECT d.step_id FROM step_dependencies d JOIN finished f ON d.depends_on = f.id
    WHERE f.id NOT IN (SELECT id FROM tolerated)
    UNION
    SELECT d.step_id FROM step_dependencies d JOIN downstream x ON d.depends_on = x.id
),
-- The pending dependents are skipped; an expanded map step among them (it waits on its
-- children) fails instead, and the pending children of a map step that finishes here are
-- skipped with it. Each is one probe of steps_pkey (`= ANY (ARRAY[..])`, as fence.rs's batch
-- predicate): as an equality the planner may hash them against all of `steps`, read whole
-- because statistics taken while every step was pending say every step is pending (issue 50).
skipped AS (
    UPDATE steps s
    SET status = CASE WHEN s.map_size IS NULL THEN 'skipped' ELSE 'failed' END::rara_step_status,
        finished_at = now(), updated_at = now(),
        error = CASE WHEN s.map_size IS NULL THEN {dependency_failed} ELSE jsonb_build_object(
            'code', 'MAP_CHILD_FAILED', 'retryable', false, 'details', '{}'::jsonb,
            'message', 'a child of the map step did not succeed; its children that had not started were skipped') END
    FROM (SELECT id FROM downstream
          UNION
          SELECT c.id FROM steps c
          WHERE c.parent_id IN (SELECT id FROM downstream UNION ALL SELECT id FROM finished)
            AND c.status = 'pending') x
    WHERE s.id = ANY (ARRAY[x.id]) AND s.status = 'pending' AND s.id NOT IN (SELECT id FROM targets)
    RETURNING s.id, s.run_id, s.status
),
-- What waits on a tolerated failure goes on as if it had succeeded: its map step, and the
-- next child of a bounded map.
released AS (
    UPDATE steps s SET pending_deps = s.pending_deps - n.done, updated_at = now()
    FROM (SELECT d.step_id, count(*)::int AS done
          FROM step_dependencies d JOIN tolerated t ON t.id = d.depends_on GROUP BY d.step_id) n
    WHERE s.id = n.step_id AND s.status = 'pending' AND s.id NOT IN (SELECT id FROM skipped)
),
-- A tolerated failure does not fail the run.
tally AS (
    SELECT run_id, count(*)::int AS finished,
           count(*) FILTER (WHERE status = 'failed' AND id NOT IN (SELECT id FROM tolerated))::int AS failed,
           count(*) FILTER (WHERE status = 'cancelled')::int AS cancelled
    FROM (SELECT id, run_id, status FROM finished UNION ALL SELECT id, run_id, status FROM skipped) x
    GROUP BY run_id
),
runs AS (
    UPDATE workflow_runs w
    SET steps_unfinished = w.steps_unfinished - t.finished,
        steps_failed = w.steps_failed + t.failed,
        steps_cancelled = w.steps_cancelled + t.cancelled,
        status = CASE
            WHEN w.steps_unfinished - t.finished > 0 THEN w.status
            WHEN w.steps_failed + t.failed > 0 THEN 'failed'
            WHEN w.steps_cancelled + t.cancelled > 0 THEN 'cancelled'
            ELSE 'succeeded' END::rara_run_status,
        finished_at = CASE WHEN w.steps_unfinished - t.finished = 0 THEN now() END,
        updated_at = now()
    FROM tally t
    WHERE w.id = t.run_id
)
SELECT id FROM finished
