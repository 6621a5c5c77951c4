-- The runs $1 whose objects could not be deleted ($2, why): retried at the next prune.
UPDATE artifact_deletions SET attempts = attempts + 1, last_error = left($2::text, 1000)
WHERE run_id = ANY($1::uuid[])
