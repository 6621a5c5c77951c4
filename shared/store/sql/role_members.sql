-- rara's roles $1 (migration 000021), in that order: whether each exists, and the roles that
-- are members of it (`rara migrate --roles`).
SELECT r.name AS "role!", g.oid IS NOT NULL AS "exists!",
       coalesce(array_agg(m.rolname::text ORDER BY m.rolname) FILTER (WHERE m.rolname IS NOT NULL),
                '{}') AS "members!"
FROM unnest($1::text[]) WITH ORDINALITY AS r(name, n)
LEFT JOIN pg_roles g ON g.rolname = r.name
LEFT JOIN pg_auth_members a ON a.roleid = g.oid
LEFT JOIN pg_roles m ON m.oid = a.member
GROUP BY r.name, r.n, g.oid
ORDER BY r.n
