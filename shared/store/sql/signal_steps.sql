-- The steps of the run $1 that wait for the signal $2, whatever their status, with their wait
-- (its schema, whether it accepts early signals) and, for a waiting step, what decided its
-- completion if something did. Read before a signal is delivered (signal.sql).
SELECT s.id, s.name, s.status AS "status: StepStatus", s.wait AS "wait!", w.completion->>'by' AS decided_by
FROM step_names n
JOIN steps s ON s.id = n.step_id
LEFT JOIN waits w ON w.step_id = s.id AND w.attempt = s.attempt AND s.status = 'waiting'
WHERE n.run_id = $1::uuid AND s.wait->>'kind' = 'signal' AND s.wait->>'name' = $2::text
ORDER BY s.position, s.name
