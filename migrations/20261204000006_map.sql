-- Fan-out (DESIGN.md "Data flow", map): a step with `for_each` runs once per element of a
-- list. Its first claim expands it: one child step per element, each in `steps` like any
-- other, and the mapped step waits on its children (step_dependencies) until its second
-- claim gathers their outputs, in order. All additive: NULL columns rewrite no rows.

-- The list a map step runs over: a reference (`{"$output": ..., "pointer": ...}` or
-- `{"$input": ...}`), resolved when the step is first claimed. NULL: not a map step.
ALTER TABLE steps ADD COLUMN for_each jsonb;
-- At most this many children run at once (NULL: no bound).
ALTER TABLE steps ADD COLUMN map_max_concurrency integer;
-- This many children may fail for good and the map still succeeds (NULL: none).
ALTER TABLE steps ADD COLUMN map_tolerated_failures integer;
-- Set when the map step was expanded: how many children it has.
ALTER TABLE steps ADD COLUMN map_size integer;
-- A map child: its map step, and the index of its element in the list.
ALTER TABLE steps ADD COLUMN parent_id uuid;
ALTER TABLE steps ADD COLUMN map_index integer;
ALTER TABLE steps ADD CONSTRAINT steps_map_child_whole CHECK ((parent_id IS NULL) = (map_index IS NULL));
ALTER TABLE steps ADD CONSTRAINT steps_map_concurrency_positive CHECK (map_max_concurrency IS NULL OR map_max_concurrency > 0);
ALTER TABLE steps ADD CONSTRAINT steps_map_tolerated_failures_valid CHECK (map_tolerated_failures IS NULL OR map_tolerated_failures >= 0);

-- The children of a map step (finishing a map skips its pending children; reads group them).
CREATE INDEX steps_parent_id ON steps (parent_id) WHERE parent_id IS NOT NULL;

-- Archived runs keep the same columns (prune --archive copies rows as they are).
ALTER TABLE archived_steps ADD COLUMN for_each jsonb;
ALTER TABLE archived_steps ADD COLUMN map_max_concurrency integer;
ALTER TABLE archived_steps ADD COLUMN map_tolerated_failures integer;
ALTER TABLE archived_steps ADD COLUMN map_size integer;
ALTER TABLE archived_steps ADD COLUMN parent_id uuid;
ALTER TABLE archived_steps ADD COLUMN map_index integer;
