-- Rerun from a step (docs/src/guide/recover.md): a new run made from a finished one, linked both
-- ways. `workflow_runs.rerun_of`: the run it was made from (NULL when that run was pruned);
-- its reruns are found through the partial index. `steps.carried_from`: a step carried over,
-- not run again: succeeded with the original's output, its attempts and artifacts read from
-- the original step (NULL for every step that ran in its own run).
ALTER TABLE workflow_runs ADD COLUMN rerun_of uuid REFERENCES workflow_runs (id) ON DELETE SET NULL;
CREATE INDEX workflow_runs_rerun_of ON workflow_runs (rerun_of) WHERE rerun_of IS NOT NULL;
ALTER TABLE steps ADD COLUMN carried_from uuid;
-- The archive keeps the live tables' columns in their order (prune_archive_runs.sql copies
-- whole rows).
ALTER TABLE archived_workflow_runs ADD COLUMN rerun_of uuid;
ALTER TABLE archived_steps ADD COLUMN carried_from uuid;
