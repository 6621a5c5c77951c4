-- The tables of $2 (names) that changed at least as much as their size since their last
-- analyze (reltuples is -1 before the first), at least $1 times, and that this role may
-- analyze (owns).
SELECT c.relname::text AS "relname!"
FROM pg_class c
JOIN pg_stat_user_tables t ON t.relid = c.oid
WHERE c.oid = ANY($2::text[]::regclass[])
  AND t.n_mod_since_analyze >= greatest($1::bigint, c.reltuples::bigint)
  AND pg_has_role(c.relowner, 'USAGE')
ORDER BY c.relname
