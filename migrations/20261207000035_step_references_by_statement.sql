-- A step's dependencies, artifacts and wait go with it by the statement trigger that already
-- deletes its attempts (migration 000014), not by four `ON DELETE CASCADE` foreign keys: each
-- key ran a query of its own for every deleted step, four per step at every prune (issue 50,
-- docs/benchmarks/journal/2026-12-07-prune-by-statement.md). What the keys checked at insert,
-- that the step referred to exists, a statement trigger on each table checks instead, under
-- the key's name and its SQLSTATE (23503).
--
-- What the keys also did, lock the step referred to (`FOR KEY SHARE`) so that it cannot be
-- deleted before the insert commits, nothing needs: steps are deleted only with their run
-- (the prune, migration 000017), and only finished runs are pruned, while each of these rows
-- is written for a step of a run that has not finished (a submission or a map's expansion
-- writes its dependencies with its steps, a holder its artifacts, the scheduler a pending
-- step's wait).
ALTER TABLE step_dependencies DROP CONSTRAINT step_dependencies_step_id_fkey,
                              DROP CONSTRAINT step_dependencies_depends_on_fkey;
ALTER TABLE artifacts DROP CONSTRAINT artifacts_step_id_fkey;
ALTER TABLE waits DROP CONSTRAINT waits_step_id_fkey;

CREATE OR REPLACE FUNCTION rara_steps_delete_attempts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM step_attempts a USING rara_deleted_steps d WHERE a.step_id = d.id;
    -- By their indexes, whatever the plan: as joins, a generic plan may hash a whole table
    -- against the batch (prune_runs.sql says the same of the runs).
    DELETE FROM step_dependencies x
    WHERE x.step_id = ANY (ARRAY(SELECT id FROM rara_deleted_steps))
       OR x.depends_on = ANY (ARRAY(SELECT id FROM rara_deleted_steps));
    DELETE FROM artifacts x WHERE x.step_id = ANY (ARRAY(SELECT id FROM rara_deleted_steps));
    DELETE FROM waits x WHERE x.step_id = ANY (ARRAY(SELECT id FROM rara_deleted_steps));
    RETURN NULL;
END $$;

-- The insert checks: the trigger's arguments are pairs of a column naming a step and the
-- name of the key that checked it; the first step named that does not exist fails the
-- statement as the key did.
CREATE FUNCTION rara_check_steps_exist() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    missing uuid;
BEGIN
    FOR i IN 0 .. TG_NARGS - 1 BY 2 LOOP
        EXECUTE format('SELECT n.%1$I FROM rara_inserted n
                        WHERE NOT EXISTS (SELECT 1 FROM steps s WHERE s.id = n.%1$I) LIMIT 1', TG_ARGV[i])
            INTO missing;
        IF missing IS NOT NULL THEN
            RAISE EXCEPTION 'insert or update on table "%" violates foreign key constraint "%"',
                    TG_TABLE_NAME, TG_ARGV[i + 1]
                USING ERRCODE = 'foreign_key_violation', CONSTRAINT = TG_ARGV[i + 1], TABLE = TG_TABLE_NAME,
                      DETAIL = format('Key (%s)=(%s) is not present in table "steps".', TG_ARGV[i], missing);
        END IF;
    END LOOP;
    RETURN NULL;
END $$;

CREATE TRIGGER step_dependencies_check_steps AFTER INSERT ON step_dependencies
    REFERENCING NEW TABLE AS rara_inserted FOR EACH STATEMENT
    EXECUTE FUNCTION rara_check_steps_exist('step_id', 'step_dependencies_step_id_fkey',
                                            'depends_on', 'step_dependencies_depends_on_fkey');
CREATE TRIGGER artifacts_check_steps AFTER INSERT ON artifacts
    REFERENCING NEW TABLE AS rara_inserted FOR EACH STATEMENT
    EXECUTE FUNCTION rara_check_steps_exist('step_id', 'artifacts_step_id_fkey');
CREATE TRIGGER waits_check_steps AFTER INSERT ON waits
    REFERENCING NEW TABLE AS rara_inserted FOR EACH STATEMENT
    EXECUTE FUNCTION rara_check_steps_exist('step_id', 'waits_step_id_fkey');

ALTER FUNCTION rara_check_steps_exist() OWNER TO rara_owner;
GRANT EXECUTE ON FUNCTION rara_check_steps_exist() TO rara_runtime, rara_console;
