-- Of the runs $1, those still running, locked (another scheduler skips them): the children to
-- cancel because their parent step no longer waits for them.
SELECT id FROM workflow_runs WHERE id = ANY($1::uuid[]) AND status = 'running'
FOR UPDATE SKIP LOCKED
