-- Every non-HOT update of `steps` (three per step: lease, claim, outcome) inserts into every
-- index of the table. `steps_run_id` duplicated the leading column of the unique index
-- `steps_name_unique_in_run (run_id, name)`, which serves the same lookups by run.
DROP INDEX steps_run_id;
