-- The console's live channel (DESIGN.md "API and console"): whenever a run or one of its
-- steps changes status or progress, `NOTIFY rara_console, '<run id>'` at commit. The console's
-- server-sent events listen on it instead of polling. Statement-level triggers with
-- transition tables: a batch statement (a claim of ten steps, a cancel of a thousand) sends
-- one notification per run it touched, and Postgres folds identical ones of a transaction.
-- A heartbeat (lease expiry only) notifies nothing.

CREATE FUNCTION rara_console_notify_steps() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    run uuid;
BEGIN
    FOR run IN
        SELECT DISTINCT n.run_id FROM changed_new n JOIN changed_old o ON o.id = n.id
        WHERE n.status IS DISTINCT FROM o.status OR n.progress IS DISTINCT FROM o.progress
    LOOP
        PERFORM pg_notify('rara_console', run::text);
    END LOOP;
    RETURN NULL;
END $$;

CREATE TRIGGER steps_console_notify AFTER UPDATE ON steps
    REFERENCING OLD TABLE AS changed_old NEW TABLE AS changed_new
    FOR EACH STATEMENT EXECUTE FUNCTION rara_console_notify_steps();

CREATE FUNCTION rara_console_notify_runs() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    run uuid;
BEGIN
    FOR run IN SELECT DISTINCT n.id FROM changed_new n LOOP
        PERFORM pg_notify('rara_console', run::text);
    END LOOP;
    RETURN NULL;
END $$;

-- A new run appears in the runs list; a finished one changes status there.
CREATE TRIGGER workflow_runs_console_notify_insert AFTER INSERT ON workflow_runs
    REFERENCING NEW TABLE AS changed_new
    FOR EACH STATEMENT EXECUTE FUNCTION rara_console_notify_runs();
CREATE TRIGGER workflow_runs_console_notify_update AFTER UPDATE ON workflow_runs
    REFERENCING NEW TABLE AS changed_new
    FOR EACH STATEMENT EXECUTE FUNCTION rara_console_notify_runs();
