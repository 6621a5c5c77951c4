-- A console listener $1 registers (or refreshes its registration) for $2 ms: while any
-- registration lasts, changes are notified on `rara_console` (migration 000013). Answers
-- whether notifications were off before (no registration had lasted until now).
WITH before AS (
    SELECT rara_console_listened() AS listened
), registered AS (
    INSERT INTO console_listeners (id, expires_at)
    VALUES ($1::uuid, now() + $2::bigint * interval '1 millisecond')
    ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at
)
SELECT NOT listened AS "turned_on!" FROM before
