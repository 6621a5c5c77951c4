#!/usr/bin/env bash
# Prints the plan of the scheduler's lease statement: it must read the partial index steps_due.
set -euo pipefail
url=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/rara}
psql "$url" -v ON_ERROR_STOP=1 -X <<'SQL'
EXPLAIN
WITH due AS (
    SELECT id FROM steps
    WHERE status = 'pending' AND pending_deps = 0 AND next_run_at <= now()
    ORDER BY next_run_at LIMIT 10
    FOR UPDATE SKIP LOCKED
)
UPDATE steps s
SET status = 'leased', leased_by = 'explain', lease_token = gen_random_uuid(),
    lease_expires_at = now() + interval '1 minute', updated_at = now()
FROM due WHERE s.id = due.id
RETURNING s.id;
SQL
