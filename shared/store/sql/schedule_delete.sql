-- Deletes the schedule $1; its runs stay (they keep its id).
DELETE FROM schedules WHERE name = $1::text RETURNING id
