-- Permanent failures (the targets of finish_tail.sql): $1..$3 the holders (fence.rs), $4
-- their errors.
    SELECT s.id, 'failed'::rara_step_status AS new_status, i.error, 'failed'::rara_attempt_outcome AS attempt_outcome
    FROM steps s
    JOIN unnest($1::uuid[], $2::text[], $3::bigint[], $4::jsonb[]) AS i(step_id, worker, fence, error)
      ON {holders}
    FOR UPDATE OF s
