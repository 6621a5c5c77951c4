-- Two more checks off the hot path (issues 19 and 24; BENCHMARKS.md "Run checks at insert",
-- migration 000014 for the same move on `steps`). A run's name and its trace context are
-- written when it is submitted and never change, yet their CHECK constraints were prepared
-- (the expression read back and compiled; one of them a regular expression) at every
-- statement that updates `workflow_runs`: every outcome, which updates its runs' counters.
-- They are now checked by a row trigger where those columns are written (the submission's
-- insert, or an update that names them). Same names, same SQLSTATE (23514, check_violation),
-- same rule (a NULL passes, as in a CHECK); the error is raised after the row is written, and
-- nothing of the statement lands.

CREATE FUNCTION rara_runs_check_submitted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    violated text;
BEGIN
    violated := CASE
        WHEN NOT (NEW.name <> '') THEN 'workflow_runs_name_not_empty'
        WHEN NOT (NEW.trace_context ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$')
            THEN 'workflow_runs_trace_context_traceparent'
    END;
    IF violated IS NOT NULL THEN
        RAISE EXCEPTION 'new row for relation "workflow_runs" violates check constraint "%"', violated
            USING ERRCODE = 'check_violation', SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME,
                  CONSTRAINT = violated;
    END IF;
    RETURN NULL;
END $$;

ALTER TABLE workflow_runs
    DROP CONSTRAINT workflow_runs_name_not_empty,
    DROP CONSTRAINT workflow_runs_trace_context_traceparent;

CREATE TRIGGER workflow_runs_submitted_checked
    AFTER INSERT OR UPDATE OF name, trace_context ON workflow_runs
    FOR EACH ROW
    EXECUTE FUNCTION rara_runs_check_submitted();
