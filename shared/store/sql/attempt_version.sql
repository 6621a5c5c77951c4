-- Records on the current attempt the capability version the remote executor runs it at ($4),
-- for the holder $1..$3 (fence.rs). Zero rows: the lease is lost.
UPDATE step_attempts a SET capability_version = $4::text
FROM steps s
WHERE a.step_id = s.id AND a.attempt = s.attempt AND {holder}
