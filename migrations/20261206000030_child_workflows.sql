-- Child workflows (docs/src/guide/recover.md "Child workflows"): a step with `run:` runs the
-- reserved operation `workflow.run`. The executor that claims it makes the child run (keyed
-- `child:<step>:<attempt>`, so one per parent attempt) and, in the same transaction and fenced
-- like every write after the claim, lets the step wait for it: `waiting`, no lease, a row in
-- `waits` of kind `child` naming the child. The scheduler's round of waits decides that wait
-- when the child run ends, and cancels the child of a wait that ended otherwise (the parent
-- cancelled, timed out, failed).

-- The two links: the parent step (and its attempt) on the child run, the child on the wait.
ALTER TABLE workflow_runs ADD COLUMN parent_step_id uuid;
ALTER TABLE workflow_runs ADD COLUMN parent_attempt integer;
ALTER TABLE workflow_runs ADD CONSTRAINT workflow_runs_parent_whole
    CHECK ((parent_step_id IS NULL) = (parent_attempt IS NULL));
-- A step's children (the console, the depth of a new child); only child runs are in it.
CREATE INDEX workflow_runs_parent ON workflow_runs (parent_step_id) WHERE parent_step_id IS NOT NULL;
ALTER TABLE archived_workflow_runs ADD COLUMN parent_step_id uuid;
ALTER TABLE archived_workflow_runs ADD COLUMN parent_attempt integer;

ALTER TABLE waits ADD COLUMN child_run_id uuid;
ALTER TABLE waits DROP CONSTRAINT waits_kind_known;
ALTER TABLE waits ADD CONSTRAINT waits_kind_known CHECK (kind IN ('timer', 'signal', 'event', 'child'));
ALTER TABLE waits ADD CONSTRAINT waits_child_named CHECK ((kind = 'child') = (child_run_id IS NOT NULL));
-- The children the round of waits looks at: only those still undecided.
CREATE INDEX waits_child ON waits (child_run_id) WHERE kind = 'child' AND completion IS NULL;
