-- The round decided the slots of the schedule $1 up to $2 (the first slot left, due at $3); $4
-- the slot that waits (`buffer_one`), $5 the latest run (NULL: unchanged) for the slot $6; $7
-- fired, $8 skipped, $9 missed and $10 failed slots; $11 why the last one failed (a slot fired
-- after it clears it).
UPDATE schedules
SET next_slot_at = $2::timestamptz, next_fire_at = $3::timestamptz, buffered_slot_at = $4::timestamptz,
    last_run_id = coalesce($5::uuid, last_run_id), last_slot_at = coalesce($6::timestamptz, last_slot_at),
    slots_fired = slots_fired + $7::bigint, slots_skipped = slots_skipped + $8::bigint,
    slots_missed = slots_missed + $9::bigint, slots_failed = slots_failed + $10::bigint,
    last_error = coalesce($11::text, CASE WHEN $7::bigint > 0 THEN NULL ELSE last_error END)
WHERE id = $1::uuid
