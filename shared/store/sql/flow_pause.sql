-- Pauses the run, key or operation $2 of kind $1 (`rara pause`): the lease takes nothing new
-- of it; what runs finishes. Returns a row if it was not paused yet.
INSERT INTO flow_pauses (kind, target) VALUES ($1::text::rara_pause_kind, $2::text)
ON CONFLICT (kind, target) DO NOTHING
RETURNING paused_at
