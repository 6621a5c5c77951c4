-- The console's live-channel triggers (migrations 000009, 000010, 000013) are enabled only
-- while a console listens. Migration 000013 made them notify nothing while no console
-- listener is registered, but they still ran for every statement that updated `steps`: the
-- statement trigger's transition tables copy each changed row, and a PL/pgSQL call checks
-- the registrations (BENCHMARKS.md "Quick commits without the flush": both triggers off,
-- 0.095 -> 0.0865 ms Postgres CPU per step at batch 10; a WHEN clause that skips the call
-- saves only 2 %, the copies are made before it is evaluated). Now they start disabled, and
-- `rara_console_notifications(true)` enables them when a console registers;
-- `rara_console_notifications(false)` disables them once no registration lasts, called when
-- a console ends its registration and by the scheduler's maintenance (a console whose
-- container froze lets its registration lapse). Enabling or disabling a trigger takes a
-- SHARE ROW EXCLUSIVE lock of the table, which waits for the writes under way and holds off
-- new ones: bounded by a lock timeout, and only when the state changes.

ALTER TABLE steps DISABLE TRIGGER steps_console_notify;
ALTER TABLE workflow_runs DISABLE TRIGGER workflow_runs_console_notify_insert;
ALTER TABLE workflow_runs DISABLE TRIGGER workflow_runs_console_notify_update;

-- Whether the console's triggers are enabled (all three are turned on and off together).
CREATE FUNCTION rara_console_triggers_enabled() RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT bool_and(t.tgenabled <> 'D') FROM pg_trigger t
    WHERE t.tgrelid IN ('steps'::regclass, 'workflow_runs'::regclass)
      AND t.tgname IN ('steps_console_notify', 'workflow_runs_console_notify_insert',
                       'workflow_runs_console_notify_update')
$$;

-- Turns the console's triggers on (`wanted`) or off; off only while no console registration
-- lasts. Returns whether it changed them. Reads the catalogue first and takes the tables'
-- locks (for at most 200 ms, else it fails with lock_not_available) only when there is
-- something to change.
CREATE FUNCTION rara_console_notifications(wanted boolean) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF rara_console_triggers_enabled() = wanted THEN
        RETURN false;
    END IF;
    IF NOT wanted AND EXISTS (SELECT FROM console_listeners WHERE expires_at > now()) THEN
        RETURN false;
    END IF;
    SET LOCAL lock_timeout = '200ms';
    LOCK TABLE steps, workflow_runs IN SHARE ROW EXCLUSIVE MODE;
    -- Under the locks, again: another call may have changed them, or a console registered.
    IF rara_console_triggers_enabled() = wanted THEN
        RETURN false;
    END IF;
    IF wanted THEN
        ALTER TABLE steps ENABLE TRIGGER steps_console_notify;
        ALTER TABLE workflow_runs ENABLE TRIGGER workflow_runs_console_notify_insert;
        ALTER TABLE workflow_runs ENABLE TRIGGER workflow_runs_console_notify_update;
    ELSE
        IF EXISTS (SELECT FROM console_listeners WHERE expires_at > now()) THEN
            RETURN false;
        END IF;
        ALTER TABLE steps DISABLE TRIGGER steps_console_notify;
        ALTER TABLE workflow_runs DISABLE TRIGGER workflow_runs_console_notify_insert;
        ALTER TABLE workflow_runs DISABLE TRIGGER workflow_runs_console_notify_update;
    END IF;
    RETURN true;
END $$;
