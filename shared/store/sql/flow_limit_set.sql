-- Sets an operator's limit on the key or group $1 (`rara limits set`): $2 at most that many
-- held at once, $3 leases per $4 ms with a bucket of $5 tokens; a part given as NULL keeps
-- its current value. Wakes the listening schedulers on $6 (a raised limit frees steps).
WITH set AS (
    INSERT INTO flow_limits AS l (target, max_held, rate_count, rate_period_ms, rate_burst)
    VALUES ($1::text, $2::int, $3::int, $4::bigint, $5::int)
    ON CONFLICT (target) DO UPDATE
    SET max_held = coalesce(excluded.max_held, l.max_held),
        rate_count = coalesce(excluded.rate_count, l.rate_count),
        rate_period_ms = coalesce(excluded.rate_period_ms, l.rate_period_ms),
        rate_burst = coalesce(excluded.rate_burst, l.rate_burst),
        updated_at = now()
    RETURNING l.target
)
SELECT s.target AS "target!", pg_notify($6::text, '') IS NOT NULL AS "woke!" FROM set s
