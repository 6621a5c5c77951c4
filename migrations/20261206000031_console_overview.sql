-- The console's overview (issue 48): each of its reads through an index.
--
-- Attempts by start time, for the charts and the per-operation and per-error tables of the
-- last hour and day. A BRIN index: `started_at` is written once, at the claim, in the order
-- attempts are inserted, so a block range's minimum and maximum bound it tightly, and the index
-- costs the claim nothing but a summary kept per 32 pages (a B-tree would add an insertion to
-- every claim). `minmax_multi` keeps a range useful when pruning frees space that later
-- attempts reuse out of order. Summarized by autovacuum (`autosummarize`); a range not yet
-- summarized (the newest pages) is always read, which is what the last hour wants anyway.
CREATE INDEX step_attempts_started_at ON step_attempts
    USING brin (started_at timestamptz_minmax_multi_ops) WITH (pages_per_range = 32, autosummarize = on);

-- The runs running now (their count on the overview): one entry per unfinished run, written at
-- submit and removed when the run finishes (an update that already changes the indexed
-- `finished_at`, so it costs no HOT update).
CREATE INDEX workflow_runs_running ON workflow_runs (created_at) WHERE status = 'running';
