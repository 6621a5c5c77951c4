-- The attempts of the steps of the run $1, oldest first; a step carried over by a rerun shows
-- the attempts of the step it was carried from.
SELECT s.id AS step_id, a.attempt, a.fence, a.leased_by, a.outcome AS "outcome: AttemptOutcome",
       a.error AS "error: Json<StepError>", a.started_at, a.finished_at, a.retry_at, a.remote_endpoint, a.capability_version,
       a.detached_spans AS "detached_spans: Json<Vec<DetachedSpan>>", a.input
FROM steps s JOIN step_attempts a ON a.step_id = coalesce(s.carried_from, s.id)
WHERE s.id IN (SELECT n.step_id FROM step_names n WHERE n.run_id = $1::uuid) ORDER BY a.attempt
