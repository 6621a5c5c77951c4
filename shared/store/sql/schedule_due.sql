-- A round of schedules: at most $1 schedules whose next slot is due, or that hold a buffered slot
-- (`buffer_one`), locked for the round's transaction (another scheduler skips them, and finds
-- them advanced once it commits), with the database's clock and whether each one's latest run is
-- still going.
SELECT s.id, s.name, s.workflow, s.workflow_version, s.cron, s.every_ms, s.timezone, s.inputs, s.overlap,
       s.catchup_window_ms, s.jitter_ms, s.next_slot_at, s.buffered_slot_at, s.last_run_id,
       coalesce(r.status = 'running', false) AS "last_running!", now() AS "now!"
FROM schedules s
LEFT JOIN workflow_runs r ON r.id = s.last_run_id
WHERE s.id = ANY(ARRAY(
    (SELECT d.id FROM schedules d WHERE NOT d.paused AND d.next_fire_at <= now() ORDER BY d.next_fire_at
     LIMIT $1::bigint)
    UNION
    (SELECT b.id FROM schedules b WHERE NOT b.paused AND b.buffered_slot_at IS NOT NULL LIMIT $1::bigint)))
ORDER BY s.next_fire_at
LIMIT $1::bigint
FOR UPDATE OF s SKIP LOCKED
