-- What each map step $1 would gather: the total size of its succeeded children's outputs (the
-- JSON text's bytes), measured here so that a map too large to gather is never read.
SELECT s.parent_id AS "map_id!", sum(octet_length(s.output::text))::bigint AS "bytes!"
FROM steps s
WHERE s.parent_id = ANY($1::uuid[]) AND s.status = 'succeeded'
GROUP BY s.parent_id
