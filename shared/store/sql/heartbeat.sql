-- Extends the lease of the holder $1..$3 (fence.rs) by $4 ms from now; returns the new expiry.
UPDATE steps s SET lease_expires_at = now() + $4::bigint * interval '1 millisecond', updated_at = now()
WHERE {holder}
RETURNING s.lease_expires_at
