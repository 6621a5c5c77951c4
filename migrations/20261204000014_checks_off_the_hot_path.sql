-- Checks off the hot path (issues 19 and 24; docs/DESIGN.md "The write path per step",
-- BENCHMARKS.md "Checks off the hot path"). Each step passes through three updates of `steps`
-- (lease, claim, outcome) and one insert into `step_attempts` (the claim); what Postgres checks
-- at each of them is paid per statement, whatever the statement changed:
--
-- * Every CHECK constraint of the table is prepared (its expression read back, simplified and
--   compiled) once per updating statement and evaluated for every row. Seven of `steps`'
--   thirteen concern what a step is submitted with (its timeout, retry policy, concurrency
--   limit, map settings), which no transition changes. They are now checked where those
--   columns are written: once per inserting statement, over all its rows, and on an update that
--   sets one of them. Same names, same SQLSTATE (23514, check_violation), same rule; the error
--   is raised at the end of the statement instead of at the row.
-- * The foreign key from `step_attempts` to `steps` ran a query per attempt inserted (the
--   claim), locking the step row it had just updated. Attempts are only written by statements
--   that read their step in the same statement; what the key still gave, that deleting a step
--   deletes its attempts (a pruned run), a trigger on `steps` keeps, once per deleting statement.

-- The first settings rule a step breaks, by the name of the CHECK constraint that held it
-- before this migration; NULL when it breaks none. A NULL column breaks no rule, as in a CHECK.
CREATE FUNCTION rara_step_settings_violation(
    timeout_seconds integer, retry_initial_delay_ms bigint, retry_max_delay_ms bigint,
    retry_multiplier double precision, concurrency_key text, concurrency_limit integer,
    parent_id uuid, map_index integer, map_max_concurrency integer, map_tolerated_failures integer
) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN NOT (timeout_seconds > 0) THEN 'steps_timeout_positive'
        WHEN NOT (retry_initial_delay_ms >= 0 AND retry_max_delay_ms >= retry_initial_delay_ms
                  AND retry_multiplier >= 1) THEN 'steps_retry_valid'
        WHEN NOT (concurrency_limit IS NULL OR concurrency_limit > 0) THEN 'steps_concurrency_limit_positive'
        WHEN NOT (concurrency_limit IS NULL OR concurrency_key IS NOT NULL) THEN 'steps_concurrency_limit_keyed'
        WHEN NOT ((parent_id IS NULL) = (map_index IS NULL)) THEN 'steps_map_child_whole'
        WHEN NOT (map_max_concurrency IS NULL OR map_max_concurrency > 0) THEN 'steps_map_concurrency_positive'
        WHEN NOT (map_tolerated_failures IS NULL OR map_tolerated_failures >= 0) THEN 'steps_map_tolerated_failures_valid'
    END
$$;

CREATE FUNCTION rara_steps_check_settings() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    violated text;
BEGIN
    IF TG_LEVEL = 'ROW' THEN
        violated := rara_step_settings_violation(
            NEW.timeout_seconds, NEW.retry_initial_delay_ms, NEW.retry_max_delay_ms, NEW.retry_multiplier,
            NEW.concurrency_key, NEW.concurrency_limit, NEW.parent_id, NEW.map_index,
            NEW.map_max_concurrency, NEW.map_tolerated_failures);
    ELSE
        SELECT v INTO violated FROM (
            SELECT rara_step_settings_violation(
                n.timeout_seconds, n.retry_initial_delay_ms, n.retry_max_delay_ms, n.retry_multiplier,
                n.concurrency_key, n.concurrency_limit, n.parent_id, n.map_index,
                n.map_max_concurrency, n.map_tolerated_failures) AS v
            FROM rara_inserted_steps n) c
        WHERE v IS NOT NULL LIMIT 1;
    END IF;
    IF violated IS NOT NULL THEN
        RAISE EXCEPTION 'new row for relation "steps" violates check constraint "%"', violated
            USING ERRCODE = 'check_violation', SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME,
                  CONSTRAINT = violated;
    END IF;
    RETURN NULL;
END $$;

ALTER TABLE steps
    DROP CONSTRAINT steps_timeout_positive,
    DROP CONSTRAINT steps_retry_valid,
    DROP CONSTRAINT steps_concurrency_limit_positive,
    DROP CONSTRAINT steps_concurrency_limit_keyed,
    DROP CONSTRAINT steps_map_child_whole,
    DROP CONSTRAINT steps_map_concurrency_positive,
    DROP CONSTRAINT steps_map_tolerated_failures_valid;

CREATE TRIGGER steps_settings_inserted
    AFTER INSERT ON steps
    REFERENCING NEW TABLE AS rara_inserted_steps
    FOR EACH STATEMENT
    EXECUTE FUNCTION rara_steps_check_settings();

CREATE TRIGGER steps_settings_updated
    AFTER UPDATE OF timeout_seconds, retry_initial_delay_ms, retry_max_delay_ms, retry_multiplier,
                    concurrency_key, concurrency_limit, parent_id, map_index, map_max_concurrency,
                    map_tolerated_failures ON steps
    FOR EACH ROW
    EXECUTE FUNCTION rara_steps_check_settings();

-- A step's attempts go with it.
ALTER TABLE step_attempts DROP CONSTRAINT step_attempts_step_id_fkey;

CREATE FUNCTION rara_steps_delete_attempts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM step_attempts a USING rara_deleted_steps d WHERE a.step_id = d.id;
    RETURN NULL;
END $$;

CREATE TRIGGER steps_delete_attempts
    AFTER DELETE ON steps
    REFERENCING OLD TABLE AS rara_deleted_steps
    FOR EACH STATEMENT
    EXECUTE FUNCTION rara_steps_delete_attempts();
