-- The artifacts of the steps of the run $1, in the order they were recorded.
SELECT a.id, a.step_id, a.attempt, a.name, a.uri, a.media_type, a.size_bytes, a.digest, a.created_at
FROM artifacts a JOIN steps s ON s.id = a.step_id
WHERE s.id IN (SELECT n.step_id FROM step_names n WHERE n.run_id = $1::uuid) ORDER BY a.id
