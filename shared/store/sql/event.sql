-- Receives the event $1 with the id $2 and the key $3, its payload $4: unless an event of that
-- name and id was received already (then nothing changes: sends are idempotent), it is kept
-- (for the waits that begin later, wait_match.sql) and decides the wait of every step waiting
-- for that name and key (still `waiting`, nothing decided yet). Returns whether the id was new
-- and the steps decided.
WITH fresh AS (
    SELECT NOT EXISTS (SELECT 1 FROM events e WHERE e.name = $1::text AND e.id = $2::text) AS yes
),
recorded AS (
    INSERT INTO events (name, id, key, payload)
    SELECT $1::text, $2::text, $3::text, $4::jsonb WHERE (SELECT yes FROM fresh)
    ON CONFLICT DO NOTHING
    RETURNING 1
),
locked AS (
    SELECT s.id, s.attempt FROM waits w JOIN steps s ON s.id = w.step_id
    WHERE w.kind = 'event' AND w.name = $1::text AND w.key = $3::text AND w.completion IS NULL
      AND s.status = 'waiting' AND s.attempt = w.attempt AND (SELECT yes FROM fresh)
    ORDER BY s.id
    FOR UPDATE OF s
),
decided AS (
    UPDATE waits w SET completion = rara_event_completion($2::text, $4::jsonb), completed_at = now()
    FROM locked l
    WHERE w.step_id = l.id AND w.attempt = l.attempt AND w.completion IS NULL
    RETURNING w.step_id
)
SELECT (SELECT yes FROM fresh) AND EXISTS (SELECT 1 FROM recorded) AS "fresh!",
       array(SELECT step_id FROM decided) AS "decided!"
