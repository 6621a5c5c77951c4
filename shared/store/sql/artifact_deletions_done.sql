-- The runs $1 whose objects were deleted: nothing more to do for them.
DELETE FROM artifact_deletions WHERE run_id = ANY($1::uuid[])
