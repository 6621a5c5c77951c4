-- Up to $1 runs still running past their deadline, the earliest first, locked (a second
-- scheduler skips them): what the scheduler times out next.
SELECT id FROM workflow_runs
WHERE status = 'running' AND deadline_at IS NOT NULL AND deadline_at <= now()
ORDER BY deadline_at
LIMIT $1::bigint
FOR UPDATE SKIP LOCKED
