-- The attempts of the run or step $1 that run detached on a remote executor (parked: `leased`
-- with `remote_endpoint` set), with what it takes to cancel them there: step, attempt, fence,
-- endpoint. Read before a cancel, so the cancel reaches them at once.
SELECT id AS step_id, attempt, fence AS "fence!", remote_endpoint AS "remote_endpoint!"
FROM steps
WHERE id IN (SELECT $1::uuid UNION ALL SELECT n.step_id FROM step_names n WHERE n.run_id = $1::uuid) AND status = 'leased' AND remote_endpoint IS NOT NULL
