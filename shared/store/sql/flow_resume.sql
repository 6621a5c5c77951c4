-- Resumes the run, key or operation $2 of kind $1 (`rara resume`) and wakes the listening
-- schedulers on $3. Returns a row if it was paused.
WITH gone AS (
    DELETE FROM flow_pauses WHERE kind = $1::text::rara_pause_kind AND target = $2::text RETURNING paused_at
)
SELECT g.paused_at, pg_notify($3::text, '') IS NOT NULL AS "woke!" FROM gone g
