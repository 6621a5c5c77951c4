-- When the attempts that claims re-attached to started ($1 step ids, $2 their attempts):
-- a re-attached step's deadline counts from its attempt's start (claim.sql).
SELECT a.step_id AS "step_id!", a.started_at AS "started_at!"
FROM unnest($1::uuid[], $2::int[]) AS t(step_id, attempt)
JOIN step_attempts a ON a.step_id = t.step_id AND a.attempt = t.attempt
