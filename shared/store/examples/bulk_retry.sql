-- The bulk-retry data set (docs/benchmarks/journal/2026-12-06-bulk-retry.md): 1,000 runs of
-- 1,000 steps each (1,000,000 steps), all succeeded, but the 10 runs named `broken`, whose
-- 10,000 steps failed. Run once on a migrated, empty database; autovacuum stays off for the
-- tables it fills, and the example analyzes them after.
ALTER TABLE steps SET (autovacuum_enabled = false);
ALTER TABLE step_names SET (autovacuum_enabled = false);
ALTER TABLE workflow_runs SET (autovacuum_enabled = false);

INSERT INTO workflow_runs (id, name, status, steps_total, steps_unfinished, steps_failed, finished_at, created_at)
SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(r), 12, '0'))::uuid,
       CASE WHEN r % 100 = 0 THEN 'broken' ELSE 'fine' END,
       CASE WHEN r % 100 = 0 THEN 'failed' ELSE 'succeeded' END::rara_run_status,
       1000, 0, CASE WHEN r % 100 = 0 THEN 1000 ELSE 0 END,
       now(), now() - (1000 - r) * interval '1 second'
FROM generate_series(0, 999) r;

INSERT INTO step_names (run_id, name, step_id)
SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(i / 1000), 12, '0'))::uuid, 's' || (i % 1000),
       ('00000000-0000-7000-8000-' || lpad(to_hex(1000000 + i), 12, '0'))::uuid
FROM generate_series(0, 999999) i;

INSERT INTO steps (id, run_id, name, position, operation, input, status, attempt, max_attempts,
                   timeout_seconds, retry_initial_delay_ms, retry_max_delay_ms, retry_multiplier,
                   output, error, created_at, updated_at, finished_at)
SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(1000000 + i), 12, '0'))::uuid,
       ('00000000-0000-7000-8000-' || lpad(to_hex(i / 1000), 12, '0'))::uuid,
       's' || (i % 1000), i % 1000, 'noop', '{}',
       CASE WHEN (i / 1000) % 100 = 0 THEN 'failed' ELSE 'succeeded' END::rara_step_status, 3, 3, 300, 1000, 300000, 2,
       CASE WHEN (i / 1000) % 100 = 0 THEN NULL ELSE '{}'::jsonb END,
       CASE WHEN (i / 1000) % 100 = 0
            THEN '{"code": "BOOM", "message": "failed on purpose", "retryable": false}'::jsonb END,
       now(), now(), now()
FROM generate_series(0, 999999) i;
