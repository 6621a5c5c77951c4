-- Durable waits (docs/src/guide/waits.md): a step that waits for a timer, a signal or an event
-- is `waiting` while it does, with no lease and nothing on a queue. A value added to an enum
-- cannot be used in the transaction that adds it: migration 000023 uses it.
ALTER TYPE rara_step_status ADD VALUE IF NOT EXISTS 'waiting' AFTER 'pending';
