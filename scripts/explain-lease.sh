#!/usr/bin/env bash
# Prints the plan of the scheduler's lease statement: it must read the partial index steps_due.
# The statement is the store's own (shared/store/sql/lease_due.sql), not a copy.
set -euo pipefail
cd "$(dirname "$0")/.."
url=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/rara}
{
  echo "PREPARE lease_due(int8, text, int8, timestamptz, int8, text) AS"
  cat shared/store/sql/lease_due.sql
  echo ";"
  echo "EXPLAIN EXECUTE lease_due(10, 'explain', 60000, NULL, 1000, NULL);"
} | psql "$url" -v ON_ERROR_STOP=1 -X -q
