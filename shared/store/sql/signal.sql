-- Delivers the signal $2 with the id $3 to the run $1: its payload $4, or the reason $5 it is
-- rejected with (NULL: not rejected). Unless a signal of that id was received already (then
-- nothing changes: the same id twice is one delivery), it decides the wait of every step of the
-- run waiting for it (still `waiting`, nothing decided yet: one conditional write each) and
-- records the signal with the first step it completed; with none, it records it only when $6
-- (keep: a step will wait for it and accepts early signals, see wait_match.sql). Returns
-- whether the id was new, whether the signal was recorded, and the steps decided.
WITH fresh AS (
    SELECT NOT EXISTS (SELECT 1 FROM signals g WHERE g.run_id = $1::uuid AND g.name = $2::text AND g.id = $3::text) AS yes
),
locked AS (
    SELECT s.id, s.attempt FROM step_names n JOIN steps s ON s.id = n.step_id
    WHERE n.run_id = $1::uuid AND s.status = 'waiting' AND s.wait->>'kind' = 'signal' AND s.wait->>'name' = $2::text
      AND (SELECT yes FROM fresh)
    ORDER BY s.id
    FOR UPDATE OF s
),
decided AS (
    UPDATE waits w SET completion = rara_signal_completion($3::text, $4::jsonb, $5::text), completed_at = now()
    FROM locked l
    WHERE w.step_id = l.id AND w.attempt = l.attempt AND w.completion IS NULL
    RETURNING w.step_id
),
recorded AS (
    INSERT INTO signals (run_id, name, id, payload, reject, step_id)
    SELECT $1::uuid, $2::text, $3::text, $4::jsonb, $5::text, (SELECT d.step_id FROM decided d ORDER BY d.step_id LIMIT 1)
    WHERE (SELECT yes FROM fresh) AND ($6::bool OR EXISTS (SELECT 1 FROM decided))
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT (SELECT yes FROM fresh) AS "fresh!", EXISTS (SELECT 1 FROM recorded) AS "recorded!",
       array(SELECT step_id FROM decided) AS "decided!"
