-- Deletes up to $1 rows of `waits` whose step no longer waits at that attempt (completed,
-- cancelled, or started again): a decided completion once applied, or a wait an operator
-- cancelled. Returns how many.
WITH gone AS (
    DELETE FROM waits w
    WHERE w.step_id IN (
        SELECT x.step_id FROM waits x
        WHERE x.completion IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM steps s WHERE s.id = x.step_id AND s.status = 'waiting' AND s.attempt = x.attempt)
        ORDER BY x.completed_at
        LIMIT $1::bigint
        FOR UPDATE SKIP LOCKED)
    RETURNING 1
)
SELECT count(*) AS "rows!" FROM gone
