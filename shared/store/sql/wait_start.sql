-- The scheduler starts up to $1 due waits (docs/src/guide/waits.md): each step that waits, is
-- pending with its dependencies done and due, and whose run is not paused, becomes `waiting`
-- with a new attempt (its step_attempts row, held by `wait`) and fence, and its row in `waits`
-- (replacing an earlier attempt's): when its timer or its timeout is due, and its completion
-- token (244 random bits). Nothing is queued and nothing runs for it. Returns the steps started.
WITH ready AS (
    SELECT s.id FROM steps s
    WHERE s.status = 'pending' AND s.pending_deps = 0 AND s.wait IS NOT NULL AND s.next_run_at <= now()
      AND NOT EXISTS (SELECT 1 FROM flow_pauses p WHERE p.kind = 'run' AND p.target = s.run_id::text)
    ORDER BY s.next_run_at
    LIMIT $1::bigint
    FOR UPDATE SKIP LOCKED
),
started AS (
    UPDATE steps s
    SET status = 'waiting', attempt = s.attempt + 1, fence = nextval('rara_fence_seq'), updated_at = now()
    FROM ready r WHERE s.id = r.id
    RETURNING s.id, s.run_id, s.attempt, s.fence, s.wait
),
attempts AS (
    INSERT INTO step_attempts (step_id, attempt, fence, leased_by, lease_token)
    SELECT id, attempt, fence, 'wait', gen_random_uuid() FROM started
)
INSERT INTO waits AS w (step_id, run_id, attempt, kind, name, key, due_at, token)
SELECT st.id, st.run_id, st.attempt, st.wait->>'kind', st.wait->>'name', st.wait->>'key',
       CASE WHEN st.wait->>'kind' = 'timer'
            THEN coalesce((st.wait->>'until')::timestamptz, now() + (st.wait->>'seconds')::bigint * interval '1 second')
            ELSE now() + (st.wait->>'timeout_seconds')::bigint * interval '1 second' END,
       replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '')
FROM started st
ON CONFLICT (step_id) DO UPDATE
SET run_id = excluded.run_id, attempt = excluded.attempt, kind = excluded.kind, name = excluded.name,
    key = excluded.key, due_at = excluded.due_at, token = excluded.token, started_at = now(),
    completion = NULL, completed_at = NULL
RETURNING w.step_id
