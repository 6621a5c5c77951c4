-- Gives leases back whose messages could not be sent: $1 step ids, $2 their lease tokens.
-- A lease that changed meanwhile is left alone.
UPDATE steps s
SET status = 'pending', leased_by = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = now()
FROM unnest($1::uuid[], $2::uuid[]) AS t(step_id, lease_token)
WHERE s.id = t.step_id AND s.lease_token = t.lease_token AND (s.status = 'leased') IS TRUE
