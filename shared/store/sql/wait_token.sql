-- The wait whose completion token is $1, if its step still waits at that attempt and nothing
-- decided it (a child workflow's wait has no token that completes it): its step, run and wait (a signal's schema applies to what the token carries).
-- Locks the step (wait_token_decide.sql follows in the same transaction).
SELECT s.id AS step_id, s.run_id, s.name, s.wait AS "wait!"
FROM waits w JOIN steps s ON s.id = w.step_id
WHERE w.token = $1::text AND w.kind <> 'child' AND w.completion IS NULL AND s.status = 'waiting' AND s.attempt = w.attempt
FOR UPDATE OF s
