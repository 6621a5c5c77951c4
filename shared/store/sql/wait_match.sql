-- Decides the waits started in the last minute that nothing decided yet and that something
-- already came for: a signal kept for the step (its wait accepts early signals; the oldest
-- first), or an event of its name and key received since its run was created (the newest).
-- A signal or an event that commits while a wait is starting is not seen by either side's
-- statement; this one, each maintenance tick, closes that gap. Returns the steps decided.
WITH fresh AS (
    SELECT w.step_id, w.run_id, w.attempt, w.kind, w.name, w.key FROM waits w
    WHERE w.completion IS NULL AND w.kind IN ('signal', 'event') AND w.started_at > now() - interval '1 minute'
),
kept AS (
    SELECT DISTINCT ON (f.step_id) f.step_id, g.run_id, g.name, g.id,
           rara_signal_completion(g.id, g.payload, g.reject) AS completion
    FROM fresh f JOIN signals g ON g.run_id = f.run_id AND g.name = f.name AND g.step_id IS NULL
    WHERE f.kind = 'signal'
    ORDER BY f.step_id, g.received_at
),
came AS (
    SELECT DISTINCT ON (f.step_id) f.step_id, rara_event_completion(e.id, e.payload) AS completion
    FROM fresh f JOIN workflow_runs r ON r.id = f.run_id
    JOIN events e ON e.name = f.name AND e.key = f.key AND e.received_at >= r.created_at
    WHERE f.kind = 'event'
    ORDER BY f.step_id, e.received_at DESC
),
found AS (
    SELECT step_id, completion FROM kept UNION ALL SELECT step_id, completion FROM came
),
locked AS (
    SELECT s.id, s.attempt FROM steps s JOIN found f ON f.step_id = s.id
    WHERE s.status = 'waiting'
    ORDER BY s.id
    FOR UPDATE OF s
),
decided AS (
    UPDATE waits w SET completion = f.completion, completed_at = now()
    FROM found f, locked l
    WHERE w.step_id = f.step_id AND l.id = w.step_id AND w.attempt = l.attempt AND w.completion IS NULL
    RETURNING w.step_id
),
taken AS (
    UPDATE signals g SET step_id = k.step_id
    FROM kept k WHERE g.run_id = k.run_id AND g.name = k.name AND g.id = k.id
      AND k.step_id IN (SELECT step_id FROM decided)
)
SELECT step_id AS "step_id!" FROM decided
