-- Revokes the grant of the secret pattern $1 to the workflows $2 and operations $3
-- (`rara secrets revoke`): zero rows when there is none.
DELETE FROM secret_grants WHERE secret = $1::text AND workflow = $2::text AND operation = $3::text
RETURNING id
