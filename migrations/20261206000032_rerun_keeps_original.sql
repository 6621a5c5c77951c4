-- A run stays while a rerun made from it does (docs/src/guide/recover.md): the rerun's carried
-- steps show the original's attempts and artifacts, and their offloaded outputs lie under the
-- original's prefix in the artifact store. The prune skips such a run (`prune_runs.sql`); this
-- key makes a prune that raced a rerun's submission fail (and retry) instead of deleting the
-- original under it, as `ON DELETE SET NULL` (migration 000028) allowed. NO ACTION is checked at
-- the end of the statement: one that deletes a run together with its reruns still may.
ALTER TABLE workflow_runs DROP CONSTRAINT workflow_runs_rerun_of_fkey;
ALTER TABLE workflow_runs ADD CONSTRAINT workflow_runs_rerun_of_fkey
    FOREIGN KEY (rerun_of) REFERENCES workflow_runs (id) ON DELETE NO ACTION;
