-- Pauses ($2 true) or resumes ($2 false) the schedule $1. A resumed schedule's missed slots are
-- decided by its next round: those within the catch-up window fire, older ones are missed.
UPDATE schedules SET paused = $2::boolean WHERE name = $1::text RETURNING id
