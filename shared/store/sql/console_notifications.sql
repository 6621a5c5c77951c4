-- The console's triggers on ($1 true) or off ($1 false, only while no console registration
-- lasts): migration 000016. Answers whether they changed.
SELECT rara_console_notifications($1::boolean) AS "changed!"
