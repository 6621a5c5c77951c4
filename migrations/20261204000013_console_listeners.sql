-- The console's notifications (migrations 000009, 000010) only while a console listens.
-- Every transaction that notifies takes the notification queue's lock in turn at commit (held
-- through its WAL flush), and every backend listening in the database (a scheduler waiting
-- for due steps, say) is woken and reads the queue in a transaction of its own. With a
-- notification at every claim and every outcome, a flat benchmark at batch 10 committed 0.44
-- transactions per step instead of 0.23 and spent ~15 % more Postgres CPU per step
-- (BENCHMARKS.md "Notifications only while a console listens"). A console server registers
-- its listener here (`Store::register_console_listener`, refreshed while pages are open) and
-- the triggers notify only while a registration has not expired. UNLOGGED: a registration is
-- worth nothing after a crash, and the servers register again within a refresh.
CREATE UNLOGGED TABLE console_listeners (
    id uuid PRIMARY KEY,
    expires_at timestamptz NOT NULL
);

-- Whether a console listens now. The triggers below spell the same query inline rather than
-- call this: PL/pgSQL keeps the plan of an inline query for the session, while a call of a SQL
-- function from PL/pgSQL parses and plans its body again in every transaction (6 % of
-- Postgres's CPU in a batch-10 benchmark, `perf`).
CREATE FUNCTION rara_console_listened() RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT FROM console_listeners WHERE expires_at > now())
$$;

CREATE OR REPLACE FUNCTION rara_console_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM console_listeners WHERE expires_at > now()) THEN
        RETURN NULL;
    END IF;
    -- Each branch is prepared only when it runs: a workflow_runs row has no run_id.
    IF TG_TABLE_NAME = 'steps' THEN
        PERFORM pg_notify('rara_console', NEW.run_id::text);
    ELSE
        PERFORM pg_notify('rara_console', NEW.id::text);
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION rara_console_notify_steps() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM console_listeners WHERE expires_at > now()) THEN
        RETURN NULL;
    END IF;
    PERFORM pg_notify('rara_console', c.run_id::text)
    FROM (SELECT DISTINCT n.run_id
          FROM rara_changed_new n JOIN rara_changed_old o ON o.id = n.id
          WHERE n.status IS DISTINCT FROM o.status OR n.progress IS DISTINCT FROM o.progress) c;
    RETURN NULL;
END $$;
