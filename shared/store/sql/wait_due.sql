-- Decides up to $1 waits whose time came: a timer completes (its output: when it was due); a
-- signal or an event wait times out, as its `on_timeout` says: `continue` succeeds with the
-- output {"timed_out": true}, `fail` (the default) fails with WAIT_TIMED_OUT. The earliest
-- first; a wait a completion is deciding right now is left to it. Returns the steps decided and
-- whether each timed out (a timer's completion is no timeout).
WITH due AS (
    SELECT w.step_id FROM waits w
    WHERE w.completion IS NULL AND w.due_at IS NOT NULL AND w.due_at <= now()
    ORDER BY w.due_at
    LIMIT $1::bigint
    FOR UPDATE SKIP LOCKED
)
UPDATE waits w
SET completion = CASE
        WHEN w.kind = 'timer' THEN jsonb_build_object('by', 'timer', 'output', jsonb_build_object('due_at', w.due_at))
        WHEN s.wait->>'on_timeout' = 'continue'
            THEN jsonb_build_object('by', 'timeout', 'output', jsonb_build_object('timed_out', true))
        ELSE jsonb_build_object('by', 'timeout', 'error', jsonb_build_object(
            'code', 'WAIT_TIMED_OUT', 'retryable', false,
            'message', format('no %s %s came within %s s', w.kind, w.name, s.wait->>'timeout_seconds'),
            'details', jsonb_build_object('kind', w.kind, 'name', w.name, 'timeout_seconds',
                                          (s.wait->>'timeout_seconds')::bigint)))
    END,
    completed_at = now()
FROM due d, steps s
WHERE w.step_id = d.step_id AND s.id = w.step_id
RETURNING w.step_id AS "step_id!", w.kind <> 'timer' AS "timed_out!"
