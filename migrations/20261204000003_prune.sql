-- Bounded history (DESIGN.md "Bounded history"): the retention pass and `rara prune` delete
-- finished runs oldest first, a batch at a time. This index finds them by `finished_at`
-- without reading the runs still running (never in it). `finished_at` is written once, when
-- the run finishes, so the counter updates of a running run stay HOT.
CREATE INDEX workflow_runs_finished_at ON workflow_runs (finished_at) WHERE finished_at IS NOT NULL;
