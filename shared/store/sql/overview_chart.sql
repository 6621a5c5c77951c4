-- The overview's chart: the attempts started in [$1, $2), in buckets of $3 seconds from $1,
-- counted by how they ended (through the BRIN index `step_attempts_started_at`).
SELECT floor(extract(epoch FROM a.started_at - $1::timestamptz) / $3::int8)::int8 AS bucket,
       count(*) FILTER (WHERE a.outcome = 'succeeded') AS succeeded,
       count(*) FILTER (WHERE a.outcome IN ('failed', 'lease_expired')) AS failed,
       count(*) FILTER (WHERE a.outcome = 'retrying') AS retried
FROM step_attempts a
WHERE a.started_at >= $1::timestamptz AND a.started_at < $2::timestamptz
GROUP BY 1 ORDER BY 1
