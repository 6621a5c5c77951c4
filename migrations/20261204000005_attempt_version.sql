-- The capability version a remote executor says an attempt runs (its `running` event): the
-- pinned one, or the executor's newest when the step pinned none. NULL for in-process
-- executors and executors that predate the field.
ALTER TABLE step_attempts ADD COLUMN capability_version text;
-- The archive keeps the live table's columns, in order (20261204000004_archive.sql).
ALTER TABLE archived_step_attempts ADD COLUMN capability_version text;
