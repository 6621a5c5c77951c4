-- `rara prune --dry-run`: how many finished runs (and steps under them) finished more than $1
-- milliseconds before now(): what `prune_runs.sql` would delete, batch after batch. A run that
-- a rerun staying was made from (through reruns of reruns) stays with it. Reads only.
WITH RECURSIVE kept AS (
    SELECT r.rerun_of AS id FROM workflow_runs r
    WHERE r.rerun_of IS NOT NULL
      AND NOT (coalesce(r.finished_at < now() - $1::bigint * interval '1 millisecond', false)
               AND r.status <> 'running')
    UNION
    SELECT r.rerun_of FROM workflow_runs r JOIN kept k ON r.id = k.id WHERE r.rerun_of IS NOT NULL
)
SELECT count(*) AS "runs!", coalesce(sum(steps_total), 0)::bigint AS "steps!"
FROM workflow_runs
WHERE finished_at < now() - $1::bigint * interval '1 millisecond'
  AND status <> 'running'
  AND id NOT IN (SELECT id FROM kept)
