-- The registered workflows by name (at most $1): each one's newest version, when it was
-- registered, and how many versions it has.
SELECT name, max(version) AS "version!", max(created_at) AS "created_at!", count(*) AS "versions!"
FROM workflow_definitions
GROUP BY name
ORDER BY name
LIMIT $1::bigint
