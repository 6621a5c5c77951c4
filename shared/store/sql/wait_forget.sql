-- Deletes up to $1 rows of `waits` whose step no longer waits at that attempt and which were
-- decided (completed, timed out, or ended otherwise: finish_tail.sql decides a cancelled one):
-- a decided completion once applied. Returns each wait forgotten, for its span in the run's
-- trace: when it began and was decided, what it waited for, what decided it, and its run's
-- trace context, and for a child workflow's wait, its child run (cancelled if still running).
WITH gone AS (
    DELETE FROM waits w
    WHERE w.step_id IN (
        SELECT x.step_id FROM waits x
        WHERE x.completion IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM steps s WHERE s.id = x.step_id AND s.status = 'waiting' AND s.attempt = x.attempt)
        ORDER BY x.completed_at
        LIMIT $1::bigint
        FOR UPDATE SKIP LOCKED)
    RETURNING w.step_id, w.run_id, w.attempt, w.kind, w.name, w.started_at, w.completed_at,
              w.completion->>'by' AS decided_by, w.completion ? 'error' AS failed, w.child_run_id
)
SELECT g.step_id AS "step_id!", g.run_id AS "run_id!", g.attempt AS "attempt!", g.kind AS "kind!", g.name,
       g.started_at AS "started_at!", g.completed_at AS "completed_at!", g.decided_by AS "decided_by!",
       g.failed AS "failed!", r.trace_context, g.child_run_id
FROM gone g JOIN workflow_runs r ON r.id = g.run_id
