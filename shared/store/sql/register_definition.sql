-- Registers the definition $2 under the name $1: the version holding the same content (created
-- false), else the next version (created true). Returns nothing when a concurrent registration
-- took that version number first: the caller tries again.
WITH same AS (
    SELECT version, created_at FROM workflow_definitions
    WHERE name = $1::text AND md5(definition::text) = md5($2::jsonb::text)
), added AS (
    INSERT INTO workflow_definitions (name, version, definition)
    SELECT $1::text, coalesce((SELECT max(version) FROM workflow_definitions WHERE name = $1::text), 0) + 1, $2::jsonb
    WHERE NOT EXISTS (SELECT FROM same)
    ON CONFLICT DO NOTHING
    RETURNING version, created_at
)
SELECT version AS "version!", created_at AS "created_at!", true AS "created!" FROM added
UNION ALL
SELECT version, created_at, false FROM same
