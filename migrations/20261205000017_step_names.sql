-- A run's steps by name (issue 19; docs/DESIGN.md "The write path per step", BENCHMARKS.md
-- "What dominates"). The unique index `steps_name_unique_in_run (run_id, name)` was the index
-- every read of a run's steps used, and as an index of `steps` it took a new entry at each of
-- a step's two updates (the lease, the outcome; neither is HOT). The names now live in a table
-- of their own, written once by the submission and the map expansion and never updated: its
-- primary key keeps the constraint's name and rule, and the reads by run go through it to
-- `steps` by primary key. Without that index, the foreign key from `steps` to `workflow_runs`
-- would delete a pruned run's steps by a scan of `steps`: a statement trigger on
-- `workflow_runs` deletes them through `step_names` instead.

ALTER TABLE steps DROP CONSTRAINT steps_name_unique_in_run;

CREATE TABLE step_names (
    run_id  uuid NOT NULL,
    name    text NOT NULL,
    step_id uuid NOT NULL,
    CONSTRAINT steps_name_unique_in_run PRIMARY KEY (run_id, name)
);

INSERT INTO step_names (run_id, name, step_id) SELECT run_id, name, id FROM steps;

ALTER TABLE steps DROP CONSTRAINT steps_run_id_fkey;

-- A deleted run's names and steps go with it (the steps' attempts, dependencies and artifacts
-- follow by their own trigger and keys).
CREATE FUNCTION rara_runs_delete_steps() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH gone AS (
        DELETE FROM step_names n USING rara_deleted_runs d WHERE n.run_id = d.id RETURNING n.step_id
    )
    DELETE FROM steps s WHERE s.id IN (SELECT step_id FROM gone);
    RETURN NULL;
END $$;

CREATE TRIGGER workflow_runs_delete_steps
    AFTER DELETE ON workflow_runs
    REFERENCING OLD TABLE AS rara_deleted_runs
    FOR EACH STATEMENT
    EXECUTE FUNCTION rara_runs_delete_steps();
