-- Records the latest progress of the holder $1..$3 (fence.rs): fraction $4, message $5.
UPDATE steps s SET progress = jsonb_build_object('fraction', $4::float8, 'message', $5::text), updated_at = now()
WHERE {holder}
