-- Test and benchmark history (feature `testing`): the succeeded runs of the finished steps
-- $1..$2 (exclusive), $3 steps per run. Ids are time-ordered (UUIDv7 layout) and older than
-- any fresh id.
INSERT INTO workflow_runs (id, name, status, steps_total, steps_unfinished, finished_at)
SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(r), 12, '0'))::uuid, 'history', 'succeeded', $3::bigint::int, 0, now()
FROM generate_series($1::bigint / $3::bigint, ($2::bigint - 1) / $3::bigint) r
ON CONFLICT (id) DO NOTHING
