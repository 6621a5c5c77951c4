-- The steps among the ids $1 (one DLQ page), each with what decides a dead-letter's fate:
-- its status, its current lease token (NULL unless leased or running) and when it finished.
-- Ids with no step are absent from the result.
SELECT s.id AS "id!", s.status AS "status!: StepStatus", s.lease_token, s.finished_at
FROM unnest($1::uuid[]) AS ids(id)
JOIN steps s ON s.id = ids.id
