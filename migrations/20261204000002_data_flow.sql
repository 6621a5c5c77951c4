-- Data flow (DESIGN.md "Data flow"): a run's inputs and outputs, and the input each attempt
-- ran with once its references were substituted. All additive; adding a column with a
-- constant default rewrites no rows.

-- The run's inputs (the definition's `inputs:` with `rara submit --input` overrides), read by
-- `{"$input": "/pointer"}` references when a step is claimed.
ALTER TABLE workflow_runs ADD COLUMN inputs jsonb NOT NULL DEFAULT '{}';

-- The run's outputs as defined (`outputs:`): references to its steps' outputs and artifacts
-- and to its inputs, resolved when a succeeded run is read.
ALTER TABLE workflow_runs ADD COLUMN outputs jsonb NOT NULL DEFAULT '{}';

-- The input the attempt ran with, when its step's input holds references: the references
-- substituted, secret references left as references (never a secret value). NULL: the attempt
-- ran with the step's input as stored (`steps.input`).
ALTER TABLE step_attempts ADD COLUMN input jsonb;
