-- detached_attempts.sql for the runs $1: the attempts of their steps that run detached on a
-- remote executor, with what it takes to cancel them there. Read before a bulk cancel.
SELECT id AS step_id, attempt, fence AS "fence!", remote_endpoint AS "remote_endpoint!"
FROM steps
WHERE id IN (SELECT n.step_id FROM step_names n WHERE n.run_id = ANY($1::uuid[])) AND status = 'leased' AND remote_endpoint IS NOT NULL
