-- Records an artifact of the current attempt of the holder $1..$3 (fence.rs): name $4, uri
-- $5, media type $6, size $7, digest $8.
INSERT INTO artifacts (step_id, attempt, fence, name, uri, media_type, size_bytes, digest)
SELECT s.id, s.attempt, s.fence, $4::text, $5::text, $6::text, $7::bigint, $8::text FROM steps s
WHERE {holder}
