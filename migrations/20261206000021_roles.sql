-- Three database roles (issue 43), so that no process but `rara migrate` owns the schema:
--
-- | role           | who                                 | may                                          |
-- |----------------|-------------------------------------|----------------------------------------------|
-- | `rara_owner`   | `rara migrate` only                 | owns every table, sequence, type, function   |
-- | `rara_runtime` | the scheduler and the executor      | DML on what they write, reads, fences        |
-- | `rara_console` | the API and console, operator's CLI | reads; submit, cancel, retry, flow, listeners|
--
-- All three are NOLOGIN group roles: the deployer's login users are members
-- (`GRANT rara_runtime TO rara_scheduler_login`), and a member inherits the role's privileges.
-- Roles belong to the cluster, not the database: every database on it (tests run many at once)
-- creates them if missing, and one created meanwhile by another is no failure.
--
-- The two things the runtime and the console did as owners run through SECURITY DEFINER
-- functions owned by `rara_owner`, with a fixed search_path: turning the console's triggers on
-- and off (`rara_console_notifications`, migration 000016) and the scheduler's `ANALYZE` of
-- the hot tables (`rara_analyze`, `statistics.rs`). The rule for later migrations is in
-- docs/src/internals/schema.md "Roles": a new table is owned by `rara_owner` and granted to
-- the roles in the migration that creates it (`shared/store/tests/roles.rs` fails otherwise).

DO $$
DECLARE
    name text;
BEGIN
    FOREACH name IN ARRAY ARRAY['rara_owner', 'rara_runtime', 'rara_console'] LOOP
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = name) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', name);
            EXCEPTION WHEN duplicate_object OR unique_violation THEN
                NULL; -- created meanwhile by a migration of another database
            END;
        END IF;
    END LOOP;
    -- Handing objects to rara_owner needs membership (a superuser has it). A login with
    -- CREATEROLE (RDS's master user) grants it to itself; any other gets a clear error here.
    IF NOT pg_has_role(current_user, 'rara_owner', 'MEMBER') THEN
        EXECUTE format('GRANT rara_owner TO %I', current_user);
    END IF;
    -- The owner creates the tables of later migrations when it migrates under its own login.
    EXECUTE format('GRANT USAGE, CREATE ON SCHEMA %I TO rara_owner', current_schema());
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO rara_runtime, rara_console', current_schema());
END $$;

-- The console's triggers, turned on and off as the owner (migration 000016).
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION rara_console_notifications(boolean) SECURITY DEFINER '
                   'SET search_path = pg_catalog, %I, pg_temp', current_schema());
END $$;

-- `ANALYZE (SKIP_LOCKED)` of one of the hot tables (`statistics.rs`), as the owner. Any other
-- name is refused: the caller chooses when, not what. A table autovacuum holds is skipped with
-- a WARNING, which is no news: the function raises only errors to its caller.
CREATE FUNCTION rara_analyze(hot_table text) RETURNS void LANGUAGE plpgsql SECURITY DEFINER
    SET client_min_messages = error AS $$
BEGIN
    IF hot_table NOT IN ('steps', 'step_attempts', 'workflow_runs') THEN
        RAISE EXCEPTION 'rara_analyze: % is not one of the hot tables', hot_table
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    EXECUTE format('ANALYZE (SKIP_LOCKED) %I', hot_table);
END $$;
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION rara_analyze(text) SET search_path = pg_catalog, %I, pg_temp', current_schema());
END $$;

-- Everything rara made so far belongs to the owner (a table's sequences and indexes follow it).
-- rara's functions are executed by the roles; the two SECURITY DEFINER ones by nobody else.
REVOKE EXECUTE ON FUNCTION rara_console_notifications(boolean), rara_analyze(text) FROM PUBLIC;
ALTER TABLE workflow_runs OWNER TO rara_owner;
ALTER TABLE steps OWNER TO rara_owner;
ALTER TABLE step_names OWNER TO rara_owner;
ALTER TABLE step_dependencies OWNER TO rara_owner;
ALTER TABLE step_attempts OWNER TO rara_owner;
ALTER TABLE artifacts OWNER TO rara_owner;
ALTER TABLE flow_keys OWNER TO rara_owner;
ALTER TABLE flow_limits OWNER TO rara_owner;
ALTER TABLE flow_pauses OWNER TO rara_owner;
ALTER TABLE secret_grants OWNER TO rara_owner;
ALTER TABLE console_listeners OWNER TO rara_owner;
ALTER TABLE archived_workflow_runs OWNER TO rara_owner;
ALTER TABLE archived_steps OWNER TO rara_owner;
ALTER TABLE archived_step_dependencies OWNER TO rara_owner;
ALTER TABLE archived_step_attempts OWNER TO rara_owner;
ALTER TABLE archived_artifacts OWNER TO rara_owner;
ALTER SEQUENCE rara_fence_seq OWNER TO rara_owner;
ALTER TYPE rara_run_status OWNER TO rara_owner;
ALTER TYPE rara_step_status OWNER TO rara_owner;
ALTER TYPE rara_attempt_outcome OWNER TO rara_owner;
ALTER TYPE rara_pause_kind OWNER TO rara_owner;
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid FROM pg_proc p
             WHERE p.pronamespace = current_schema()::regnamespace AND p.proname LIKE 'rara\_%'
    LOOP
        EXECUTE format('ALTER FUNCTION %s OWNER TO rara_owner', f);
        -- The runtime calls them all; the console all but the scheduler's ANALYZE.
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO rara_runtime', f);
        IF f <> 'rara_analyze(text)'::regprocedure THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO rara_console', f);
        END IF;
    END LOOP;
END $$;

-- The scheduler and the executor: everything a step's life writes (submit of child runs and
-- map expansion included), retention's deletes and archive, the flow keys' buckets; the
-- operator's settings (limits, pauses, secret grants) and the console's registrations read.
GRANT SELECT, INSERT, UPDATE, DELETE ON
    workflow_runs, steps, step_names, step_dependencies, step_attempts, artifacts, flow_keys
    TO rara_runtime;
GRANT SELECT, INSERT ON
    archived_workflow_runs, archived_steps, archived_step_dependencies, archived_step_attempts,
    archived_artifacts
    TO rara_runtime;
GRANT SELECT ON flow_limits, flow_pauses, secret_grants, console_listeners TO rara_runtime;
GRANT USAGE ON SEQUENCE rara_fence_seq TO rara_runtime;

-- The API and console: reads everything; writes what a submission, a cancel, a retry (one or
-- bulk), the flow control commands and a console's listener registration write. Never a
-- delete of runs or steps, never a secret grant (`rara secrets` runs as the owner).
GRANT SELECT ON
    workflow_runs, steps, step_names, step_dependencies, step_attempts, artifacts, flow_keys,
    flow_limits, flow_pauses, secret_grants, console_listeners,
    archived_workflow_runs, archived_steps, archived_step_dependencies, archived_step_attempts,
    archived_artifacts
    TO rara_console;
GRANT INSERT ON workflow_runs, steps, step_names, step_dependencies TO rara_console;
GRANT UPDATE ON workflow_runs, steps, step_attempts TO rara_console;
GRANT INSERT, UPDATE, DELETE ON flow_limits, flow_pauses, console_listeners TO rara_console;

