-- The failed and cancelled steps of a run (issue 40). Migration 000017 dropped the last index
-- of `steps` by `run_id`: every read of a run's steps goes through `step_names` to `steps` by
-- primary key. The bulk retry's search (sql/retryable_steps.sql) asks for the failed and
-- cancelled steps of every run a filter matches, and without an index it read the whole of
-- `steps`. This index holds only those steps: a submission, a lease, a claim and a success
-- write no entry to it (their rows do not match its predicate, and `status` already appears in
-- the predicates of `steps_due` and `steps_held_lease_expiry`, so no update that was HOT stops
-- being HOT); a step that fails or is cancelled adds one entry, as it would to any index of
-- `steps`. `run_id` never changes. docs/benchmarks/journal/2026-12-06-bulk-retry.md.

CREATE INDEX steps_retryable ON steps (run_id) WHERE status IN ('failed', 'cancelled');
