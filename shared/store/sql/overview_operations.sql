-- The overview's operations: for each operation whose attempts started in [$1, $2), the
-- attempts, those that failed (retrying, failed, lease expired), and the median and 95th
-- percentile duration of the finished ones in milliseconds; the $3 busiest. Attempts through
-- `step_attempts_started_at`, their steps by primary key.
SELECT s.operation,
       count(*) AS attempts,
       count(*) FILTER (WHERE a.outcome IN ('retrying', 'failed', 'lease_expired')) AS failures,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM a.finished_at - a.started_at) * 1000)
           FILTER (WHERE a.finished_at IS NOT NULL) AS p50_ms,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM a.finished_at - a.started_at) * 1000)
           FILTER (WHERE a.finished_at IS NOT NULL) AS p95_ms
FROM step_attempts a
JOIN steps s ON s.id = a.step_id
WHERE a.started_at >= $1::timestamptz AND a.started_at < $2::timestamptz
GROUP BY s.operation
ORDER BY attempts DESC, s.operation
LIMIT $3::int8
