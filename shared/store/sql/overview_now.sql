-- The overview's state at $1: the runs running (`workflow_runs_running`), the runs with a step
-- waiting for a timer, a signal or an event (`waits_due`, `waits_started`), the runs that
-- failed since $2 (`workflow_runs_finished_at`), and the due steps no scheduler leased yet
-- (`steps_due`, `steps_due_key`: counted up to $3) with the oldest one's due time.
WITH due AS (
    (SELECT next_run_at FROM steps
     WHERE status = 'pending' AND pending_deps = 0 AND concurrency_key IS NULL AND wait IS NULL
       AND next_run_at <= $1::timestamptz LIMIT $3::int8)
    UNION ALL
    (SELECT next_run_at FROM steps
     WHERE status = 'pending' AND pending_deps = 0 AND concurrency_key IS NOT NULL AND wait IS NULL
       AND next_run_at <= $1::timestamptz LIMIT $3::int8)
),
waiting AS (
    SELECT run_id FROM waits WHERE completion IS NULL AND due_at IS NOT NULL
    UNION
    SELECT run_id FROM waits WHERE completion IS NULL AND kind IN ('signal', 'event')
)
SELECT (SELECT count(*) FROM workflow_runs WHERE status = 'running') AS running,
       (SELECT count(*) FROM waiting) AS waiting,
       (SELECT count(*) FROM workflow_runs WHERE finished_at >= $2::timestamptz AND status = 'failed') AS failed,
       (SELECT count(*) FROM due) AS due,
       (SELECT min(next_run_at) FROM due) AS oldest_due
