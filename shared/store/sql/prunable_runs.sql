-- `rara prune --dry-run`: how many finished runs (and steps under them) finished more than $1
-- milliseconds before now(): what `prune_runs.sql` would delete. Reads only.
SELECT count(*) AS "runs!", coalesce(sum(steps_total), 0)::bigint AS "steps!"
FROM workflow_runs
WHERE finished_at < now() - $1::bigint * interval '1 millisecond'
  AND status <> 'running'
