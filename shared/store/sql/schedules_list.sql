-- The schedules by name (at most $1; only the one named $2 when it is given), each with the
-- status of its latest run.
SELECT s.id, s.name, s.workflow, s.workflow_version, s.cron, s.every_ms, s.timezone, s.inputs, s.overlap,
       s.catchup_window_ms, s.jitter_ms, s.paused, s.next_slot_at, s.next_fire_at, s.buffered_slot_at,
       s.last_run_id, r.status AS "last_run_status?: RunStatus", s.last_slot_at, s.last_error,
       s.slots_fired, s.slots_skipped, s.slots_missed, s.slots_failed, s.created_at
FROM schedules s
LEFT JOIN workflow_runs r ON r.id = s.last_run_id
WHERE $2::text IS NULL OR s.name = $2::text
ORDER BY s.name
LIMIT $1::bigint
