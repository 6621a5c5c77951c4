-- The planner statistics of the hot tables cover the columns that statements filter, join or
-- sort on, and no others. The scheduler analyzes `steps` and `step_attempts` whenever they
-- changed as much as their size (rara_store::statistics; three times in a fresh 20,000-step
-- benchmark run), and an ANALYZE spends most of its time on the wide columns nobody asks
-- the planner about: the JSON documents (input, output, error, progress), the names and the
-- bookkeeping. Measured on 20,000 steps: ANALYZE steps 101-120 ms -> 44-58 ms.
--
-- Kept: the keys (id, run_id, step_id, attempt), status and outcome, pending_deps,
-- next_run_at, lease_expires_at, priority, operation, concurrency_key, parent_id,
-- max_attempts and remote_endpoint: every predicate of the lease, the claim, the outcomes,
-- the reaper and the browse queries (`tests/explain.rs` holds their plans).
ALTER TABLE steps
    ALTER COLUMN name SET STATISTICS 0,
    ALTER COLUMN position SET STATISTICS 0,
    ALTER COLUMN version SET STATISTICS 0,
    ALTER COLUMN input SET STATISTICS 0,
    ALTER COLUMN timeout_seconds SET STATISTICS 0,
    ALTER COLUMN retry_initial_delay_ms SET STATISTICS 0,
    ALTER COLUMN retry_max_delay_ms SET STATISTICS 0,
    ALTER COLUMN retry_multiplier SET STATISTICS 0,
    ALTER COLUMN lease_token SET STATISTICS 0,
    ALTER COLUMN leased_by SET STATISTICS 0,
    ALTER COLUMN fence SET STATISTICS 0,
    ALTER COLUMN progress SET STATISTICS 0,
    ALTER COLUMN output SET STATISTICS 0,
    ALTER COLUMN error SET STATISTICS 0,
    ALTER COLUMN created_at SET STATISTICS 0,
    ALTER COLUMN updated_at SET STATISTICS 0,
    ALTER COLUMN finished_at SET STATISTICS 0,
    ALTER COLUMN remote_sequence SET STATISTICS 0,
    ALTER COLUMN for_each SET STATISTICS 0,
    ALTER COLUMN map_max_concurrency SET STATISTICS 0,
    ALTER COLUMN map_tolerated_failures SET STATISTICS 0,
    ALTER COLUMN map_size SET STATISTICS 0,
    ALTER COLUMN map_index SET STATISTICS 0,
    ALTER COLUMN concurrency_limit SET STATISTICS 0;

ALTER TABLE step_attempts
    ALTER COLUMN fence SET STATISTICS 0,
    ALTER COLUMN leased_by SET STATISTICS 0,
    ALTER COLUMN lease_token SET STATISTICS 0,
    ALTER COLUMN error SET STATISTICS 0,
    ALTER COLUMN started_at SET STATISTICS 0,
    ALTER COLUMN finished_at SET STATISTICS 0,
    ALTER COLUMN retry_at SET STATISTICS 0,
    ALTER COLUMN detached_spans SET STATISTICS 0,
    ALTER COLUMN remote_endpoint SET STATISTICS 0,
    ALTER COLUMN input SET STATISTICS 0,
    ALTER COLUMN capability_version SET STATISTICS 0;
