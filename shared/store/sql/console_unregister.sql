-- A console listener $1 stops listening; expired registrations go with it.
DELETE FROM console_listeners WHERE id = $1::uuid OR expires_at <= now()
