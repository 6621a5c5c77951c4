-- The artifact store's objects of pruned runs, still to delete (DESIGN.md "Artifacts and large
-- values"). The prune of a run's rows queues its id in the same statement (`prune_runs.sql`,
-- `prune_archive_runs.sql`, when an artifact store is configured); the pass after it deletes
-- everything under `runs/{run}/` in the store, then the row. A failure (the store unreachable)
-- leaves the row, with its attempts and last error, for the next prune: objects never block the
-- prune of rows, and a deletion is retried until done (deleting a prefix twice is harmless).
CREATE TABLE artifact_deletions (
    run_id      uuid PRIMARY KEY,
    queued_at   timestamptz NOT NULL DEFAULT now(),
    -- Passes that failed to delete the run's objects so far.
    attempts    integer NOT NULL DEFAULT 0,
    -- The last failure, for an operator (`SELECT * FROM artifact_deletions`); never a secret.
    last_error  text,
    CONSTRAINT artifact_deletions_attempts_not_negative CHECK (attempts >= 0)
);
-- The oldest first.
CREATE INDEX artifact_deletions_queued_at ON artifact_deletions (queued_at);

ALTER TABLE artifact_deletions OWNER TO rara_owner;
GRANT SELECT, INSERT, UPDATE, DELETE ON artifact_deletions TO rara_runtime;
GRANT SELECT ON artifact_deletions TO rara_console;
