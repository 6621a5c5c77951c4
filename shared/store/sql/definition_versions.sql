-- The versions of the registered workflow $1, newest first (at most $2).
SELECT version, created_at FROM workflow_definitions
WHERE name = $1::text
ORDER BY version DESC
LIMIT $2::bigint
