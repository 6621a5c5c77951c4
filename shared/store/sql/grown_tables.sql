-- The tables of $2 (names) that grew to twice the rows their statistics saw (reltuples is -1
-- before the first analyze), by at least $1 rows, and that this role may analyze (owns).
-- Growth, not change: a table's updates and deletes leave its plans right (every statement
-- reaches its rows through an index, `tests/explain.rs`), and autovacuum keeps the statistics
-- of a table that churns at its size; what it cannot do is follow a table that grows from
-- empty faster than its naptime (`rara_store::statistics`).
SELECT c.relname::text AS "relname!"
FROM pg_class c
JOIN pg_stat_user_tables t ON t.relid = c.oid
WHERE c.oid = ANY($2::text[]::regclass[])
  AND t.n_live_tup >= greatest(c.reltuples::bigint, 0) + greatest($1::bigint, c.reltuples::bigint)
  AND pg_has_role(c.relowner, 'USAGE')
ORDER BY c.relname
