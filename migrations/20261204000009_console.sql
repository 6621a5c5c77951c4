-- The console's live channel (docs/DESIGN.md "API and console"): whenever a run changes
-- (created, a status, a step finished) or one of its steps changes status or progress,
-- `NOTIFY rara_console, '<run id>'` at commit. The console's server-sent events listen on it
-- instead of polling. Row triggers restricted by column and by a WHEN condition, evaluated
-- before any function is called: a heartbeat (the lease only) or any other write fires
-- nothing. Postgres folds identical notifications of one transaction, so a batch statement
-- over ten steps of one run sends one.

CREATE FUNCTION rara_console_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Each branch is prepared only when it runs: a workflow_runs row has no run_id.
    IF TG_TABLE_NAME = 'steps' THEN
        PERFORM pg_notify('rara_console', NEW.run_id::text);
    ELSE
        PERFORM pg_notify('rara_console', NEW.id::text);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER steps_console_notify
    AFTER UPDATE OF status, progress ON steps
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.progress IS DISTINCT FROM NEW.progress)
    EXECUTE FUNCTION rara_console_notify();

CREATE TRIGGER workflow_runs_console_notify_insert
    AFTER INSERT ON workflow_runs
    FOR EACH ROW EXECUTE FUNCTION rara_console_notify();

CREATE TRIGGER workflow_runs_console_notify_update
    AFTER UPDATE OF status, steps_unfinished ON workflow_runs
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.steps_unfinished IS DISTINCT FROM NEW.steps_unfinished)
    EXECUTE FUNCTION rara_console_notify();
