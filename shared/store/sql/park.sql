-- Parks remote attempts that still run when the invocation ends (DESIGN.md "Long steps"):
-- $1..$3 the holders (fence.rs), $4 the endpoints that run them, $5 the last event sequence
-- recorded, $6 when each holder attached, $7 the re-attach interval (ms), $8 the delivery
-- timeout (ms). The step goes back to `leased` under the same lease token, keeping its
-- attempt, its fence and its progress: its message comes back after the interval and the
-- claim re-attaches (claim.sql). The lease lasts the interval plus the delivery timeout, like
-- a retry that rides on its message. The attempt row records the stretch it was attached.
-- Returns the steps written.
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::text[], $5::bigint[], $6::timestamptz[])
        AS t(step_id, worker, fence, endpoint, sequence, attached_at)
),
parked AS (
    UPDATE steps s
    SET status = 'leased', next_run_at = now() + $7::bigint * interval '1 millisecond',
        lease_expires_at = now() + ($7::bigint + $8::bigint) * interval '1 millisecond',
        remote_endpoint = i.endpoint, remote_sequence = i.sequence, updated_at = now()
    FROM input i
    WHERE {holders}
    RETURNING s.id, s.attempt, i.worker, i.endpoint, i.sequence, i.attached_at
),
spans AS (
    UPDATE step_attempts a
    SET remote_endpoint = p.endpoint,
        detached_spans = a.detached_spans || jsonb_build_array(jsonb_build_object(
            'by', p.worker, 'from', p.attached_at, 'to', now(), 'sequence', p.sequence))
    FROM parked p WHERE a.step_id = p.id AND a.attempt = p.attempt
)
SELECT id FROM parked
