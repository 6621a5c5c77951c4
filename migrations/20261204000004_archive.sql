-- Archive of pruned history (`RARA_ARCHIVE=true`, DESIGN.md "Bounded history"): a pruned run
-- and everything under it are copied here, in the statement that deletes them
-- (`prune_archive_runs.sql`). Same columns in the same order as the live tables (`LIKE`), no
-- foreign keys, no checks, one index: rows are written once and read by hand. A migration
-- that adds a column to a live table adds it here too; `tests/catalogue.rs` prepares the
-- archiving statement, so a forgotten one fails there.
CREATE TABLE archived_workflow_runs (LIKE workflow_runs);
ALTER TABLE archived_workflow_runs ADD PRIMARY KEY (id);
CREATE TABLE archived_steps (LIKE steps);
CREATE INDEX archived_steps_run_id ON archived_steps (run_id);
CREATE TABLE archived_step_dependencies (LIKE step_dependencies);
CREATE TABLE archived_step_attempts (LIKE step_attempts);
CREATE TABLE archived_artifacts (LIKE artifacts);
