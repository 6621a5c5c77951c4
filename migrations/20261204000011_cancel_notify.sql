-- An operator's cancel reaches the step's holder at once (docs/DESIGN.md "Cancel says why, and
-- comes first"): when a step goes from `leased` or `running` to `cancelled` (cancel_step_targets /
-- cancel_run_targets through finish_tail), `NOTIFY rara_cancel, '<step id>'` at commit. The
-- executor holding it listens and checks its lease at once instead of at its next heartbeat, so
-- a remote attempt that reports no progress gets `Cancel` within milliseconds. A row trigger
-- restricted by column and by a WHEN condition evaluated before any function is called: every
-- other write (a claim, a success, a heartbeat) fires nothing.

CREATE FUNCTION rara_cancel_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('rara_cancel', NEW.id::text);
    RETURN NULL;
END $$;

CREATE TRIGGER steps_cancel_notify
    AFTER UPDATE OF status ON steps
    FOR EACH ROW
    WHEN (NEW.status = 'cancelled' AND OLD.status IN ('leased', 'running'))
    EXECUTE FUNCTION rara_cancel_notify();
