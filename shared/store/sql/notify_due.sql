-- Wakes the schedulers listening on the channel $1 (delivered at commit).
SELECT FROM pg_notify($1::text, '')
