-- The artifacts of the steps of the run $1, in the order they were recorded; a step carried
-- over by a rerun shows those of the step it was carried from.
SELECT s.id AS step_id, a.attempt, a.name, a.uri, a.media_type, a.size_bytes, a.digest, a.created_at
FROM steps s JOIN artifacts a ON a.step_id = coalesce(s.carried_from, s.id)
WHERE s.id IN (SELECT n.step_id FROM step_names n WHERE n.run_id = $1::uuid) ORDER BY a.id
