-- Test and benchmark history (feature `testing`): the one succeeded attempt of each finished
-- step $1..$2 (exclusive). Fences are negative, below any the sequence issues.
INSERT INTO step_attempts (step_id, attempt, fence, leased_by, lease_token, outcome, started_at, finished_at)
SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'))::uuid, 1, -i, 'history',
       gen_random_uuid(), 'succeeded', now(), now()
FROM generate_series($1::bigint, $2::bigint - 1) i
