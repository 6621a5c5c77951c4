-- A new schedule: id $1, name $2, workflow $3 at version $4 (NULL: the newest), cron $5 or every
-- $6 ms, time zone $7, run inputs $8, overlap $9, catch-up window $10 ms, jitter $11 ms, its first
-- slot $12 due at $13. Returns nothing when the name is taken.
INSERT INTO schedules (id, name, workflow, workflow_version, cron, every_ms, timezone, inputs, overlap,
                       catchup_window_ms, jitter_ms, next_slot_at, next_fire_at)
VALUES ($1::uuid, $2::text, $3::text, $4::int, $5::text, $6::bigint, $7::text, $8::jsonb, $9::text,
        $10::bigint, $11::bigint, $12::timestamptz, $13::timestamptz)
ON CONFLICT (name) DO NOTHING
RETURNING id
