-- The attempt row is written twice (opened at the claim, closed at the outcome); the close
-- changes no indexed column and stays HOT when its page has room for the new version.
ALTER TABLE step_attempts SET (fillfactor = 80);

-- The console's notification for steps (migration 000009) fires once per statement instead
-- of once per changed row: a batch of ten steps called a PL/pgSQL function ten times, three
-- times per step (lease, claim, outcome). The statement's transition tables say which rows
-- changed their status or progress; one `pg_notify` per run among them, as before (Postgres
-- folds identical notifications of a transaction). A statement that changes neither (a
-- heartbeat) notifies nothing.
DROP TRIGGER steps_console_notify ON steps;

CREATE FUNCTION rara_console_notify_steps() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('rara_console', c.run_id::text)
    FROM (SELECT DISTINCT n.run_id
          FROM rara_changed_new n JOIN rara_changed_old o ON o.id = n.id
          WHERE n.status IS DISTINCT FROM o.status OR n.progress IS DISTINCT FROM o.progress) c;
    RETURN NULL;
END $$;

CREATE TRIGGER steps_console_notify
    AFTER UPDATE ON steps
    REFERENCING OLD TABLE AS rara_changed_old NEW TABLE AS rara_changed_new
    FOR EACH STATEMENT
    EXECUTE FUNCTION rara_console_notify_steps();
