-- Deletes up to $2 events received more than $1 seconds ago (RARA_EVENT_RETENTION_SECONDS).
-- Returns how many.
WITH gone AS (
    DELETE FROM events e
    WHERE (e.name, e.id) IN (
        SELECT x.name, x.id FROM events x
        WHERE x.received_at < now() - $1::bigint * interval '1 second'
        ORDER BY x.received_at
        LIMIT $2::bigint)
    RETURNING 1
)
SELECT count(*) AS "rows!" FROM gone
