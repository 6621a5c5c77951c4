-- Deletes up to $1 rows of flow_keys that no lease needs any more (the scheduler's maintenance,
-- DESIGN.md "Flow control"): a key with no operator limit or rate (flow_limits), no due step
-- (steps_due_key) and no leased or running step (steps_held_key). Authors choose keys, so
-- without this the table would hold one row for every key ever leased. A row deleted while a
-- lease round read it costs nothing but that round's take of the key: the lease's upsert writes
-- only when the epoch it read is still there, and a key without a row starts again at epoch 0.
-- Rows a lease round holds are skipped. Returns how many rows were deleted.
WITH idle AS (
    SELECT f.name FROM flow_keys f
    WHERE NOT EXISTS (SELECT 1 FROM flow_limits l WHERE l.target = f.name)
      AND NOT EXISTS (SELECT 1 FROM steps s
                      WHERE s.status = 'pending' AND s.pending_deps = 0 AND s.wait IS NULL AND s.concurrency_key = f.name)
      AND NOT EXISTS (SELECT 1 FROM steps s
                      WHERE s.status IN ('leased', 'running') AND s.concurrency_key = f.name)
    ORDER BY f.refilled_at
    LIMIT $1::bigint
    FOR UPDATE SKIP LOCKED
),
deleted AS (
    DELETE FROM flow_keys f USING idle i WHERE f.name = i.name RETURNING 1
)
SELECT count(*) AS "deleted!" FROM deleted
