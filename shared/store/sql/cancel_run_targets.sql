-- Cancels every unfinished step of the run $1, with the error $2 (the targets of finish_tail.sql).
    SELECT id, 'cancelled'::rara_step_status AS new_status, $2::jsonb AS error,
           'cancelled'::rara_attempt_outcome AS attempt_outcome
    FROM steps WHERE id IN (SELECT n.step_id FROM step_names n WHERE n.run_id = $1::uuid) AND status IN ('pending', 'waiting', 'leased', 'running')
    FOR UPDATE
