-- Cancels one step $1 that has not finished, with the error $2 (the targets of finish_tail.sql).
    SELECT id, 'cancelled'::rara_step_status AS new_status, $2::jsonb AS error,
           'cancelled'::rara_attempt_outcome AS attempt_outcome
    FROM steps WHERE id = $1::uuid AND status IN ('pending', 'waiting', 'leased', 'running')
    FOR UPDATE
