-- The registered definition $1 at version $2, or its newest version when $2 is NULL.
SELECT name, version, definition, created_at FROM workflow_definitions
WHERE name = $1::text AND ($2::int IS NULL OR version = $2::int)
ORDER BY version DESC
LIMIT 1
