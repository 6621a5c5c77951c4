-- A slot of the schedule $1 fired outside its calendar (trigger, backfill): $2 new runs, the
-- latest $3 for the slot $4 when it is the schedule's latest run ($5).
UPDATE schedules
SET slots_fired = slots_fired + $2::bigint,
    last_run_id = CASE WHEN $5::boolean THEN $3::uuid ELSE last_run_id END,
    last_slot_at = CASE WHEN $5::boolean THEN $4::timestamptz ELSE last_slot_at END
WHERE id = $1::uuid
