-- The artifact $1 (`GET /api/artifacts/{id}`), with the run its step belongs to.
SELECT a.id, a.uri, a.name, a.media_type, a.size_bytes, a.digest, s.run_id
FROM artifacts a JOIN steps s ON s.id = a.step_id
WHERE a.id = $1::bigint
