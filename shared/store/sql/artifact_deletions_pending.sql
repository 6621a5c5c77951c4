-- Up to $1 pruned runs whose objects in the artifact store are still to delete, the oldest
-- first. Not locked: two passes deleting the same run's objects do no harm.
SELECT run_id FROM artifact_deletions ORDER BY queued_at LIMIT $1::bigint
