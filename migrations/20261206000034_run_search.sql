-- The runs list's search (issue 48): an index for each filter beyond status, name and time.
--
-- By error code: the steps that failed or were cancelled, by the error's
-- code and run. The search asks whether a run has such a step with a given code
-- (sql/browse_runs.sql and the bulk actions' statements): either once for every run with it
-- (a hashed subplan reads this index for the code) or per run walked (a probe of code and run).
-- Like `steps_retryable` (migration 000018) it holds only finished, failed steps: a submission,
-- a lease, a claim and a success write no entry to it, and `status` is already in the
-- predicates of `steps_due` and `steps_held_lease_expiry`, so no update that was HOT stops
-- being HOT; a step that fails or is cancelled adds one entry. Skipped steps (their code is
-- always DEPENDENCY_FAILED, and a failure may skip many) are left out.
-- Its predicate is `steps_retryable`'s: the bulk retry may read either (the same rows).
CREATE INDEX steps_error_code ON steps ((error ->> 'code'), run_id)
    WHERE status IN ('failed', 'cancelled');

-- By a field of the run's inputs (`where=inputs.tenant=acme`, matched as containment:
-- `inputs @> '{"tenant": "acme"}'`). `jsonb_path_ops`: only `@>` is asked, and its entries are
-- hashes of whole paths, smaller than the default operator class's. Inputs are written once,
-- at submit; a run's updates (its counters) leave them unchanged.
CREATE INDEX workflow_runs_inputs ON workflow_runs USING gin (inputs jsonb_path_ops);

-- By registered workflow and version (`workflow=name@version`): the runs made from one
-- registered version, by name and version.
CREATE INDEX workflow_runs_workflow ON workflow_runs (name, workflow_version);
