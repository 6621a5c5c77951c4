-- The overview's errors: the $3 error codes most attempts started in [$1, $2) ended with,
-- each with how many, when last, and up to five of the runs they failed in (newest first).
SELECT a.error->>'code' AS code,
       count(*) AS attempts,
       max(a.started_at) AS last_seen,
       (array_agg(s.run_id ORDER BY a.started_at DESC))[1:5] AS runs
FROM step_attempts a
JOIN steps s ON s.id = a.step_id
WHERE a.started_at >= $1::timestamptz AND a.started_at < $2::timestamptz AND a.error IS NOT NULL
GROUP BY 1
ORDER BY attempts DESC, code
LIMIT $3::int8
