#!/usr/bin/env bash
# The baseline of `make bench`: a naive Postgres job queue driven by pgbench.
#
# One pgbench "transaction" (one run of the script below) is one job handled end to end:
#   1. lease one due row: a CTE with FOR UPDATE SKIP LOCKED feeding an UPDATE ... RETURNING
#      (its own transaction: autocommit);
#   2. complete it: an UPDATE by id (its own transaction).
# So steps/s = pgbench's tps, and Postgres commits/s = 2 × tps (commits per step = 2).
# Per job, measured around pgbench by scripts/pg-figures.py: Postgres CPU (the scratch
# database's backends, the background processes, the whole cluster), WAL bytes, commits,
# tuples written and the HOT share of the updates of `jobs`.
#
# Usage: scripts/pgbench-lease-complete.sh [--json]
# Environment: DATABASE_URL (its server is used; default postgres://postgres@127.0.0.1:5432/postgres),
#   PGBENCH_ROWS (default 1000000), PGBENCH_CLIENTS (16), PGBENCH_THREADS (2), PGBENCH_SECONDS (30).
# Needs pgbench (Debian: postgresql-client; `apt-get update && apt-get install -y postgresql-client`).
set -euo pipefail
# shellcheck source=scripts/bench-lib.sh
source "$(dirname "$0")/bench-lib.sh"

json=false
[[ "${1:-}" == "--json" ]] && json=true

rows=${PGBENCH_ROWS:-1000000}
clients=${PGBENCH_CLIENTS:-16}
threads=${PGBENCH_THREADS:-2}
seconds=${PGBENCH_SECONDS:-30}

pgbench_bin=$(command -v pgbench || ls /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | tail -1 || true)
if [[ -z "$pgbench_bin" ]]; then
    echo "pgbench is missing: apt-get update && apt-get install -y postgresql-client" >&2
    exit 1
fi

work=$(mktemp -d)
on_exit rm -rf "$work"
bench_scratch_db rara_pgbench
scratch=$BENCH_DB_URL

psql -q "$scratch" >/dev/null <<SQL
-- The naive queue: one row per job, a partial index on what is due.
CREATE TABLE jobs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    status      text NOT NULL DEFAULT 'available',
    run_at      timestamptz NOT NULL DEFAULT now(),
    attempt     integer NOT NULL DEFAULT 0,
    locked_by   text,
    locked_at   timestamptz,
    finished_at timestamptz,
    args        jsonb NOT NULL DEFAULT '{}'
) WITH (fillfactor = 70);
CREATE INDEX jobs_due ON jobs (run_at) WHERE status = 'available';
INSERT INTO jobs (run_at) SELECT now() - interval '1 hour' + i * interval '1 microsecond'
FROM generate_series(1, $rows) AS i;
VACUUM ANALYZE jobs;
SQL

cat > "$work/lease-complete.sql" <<'SQL'
WITH next AS (
    SELECT id FROM jobs
    WHERE status = 'available' AND run_at <= now()
    ORDER BY run_at
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE jobs j SET status = 'running', attempt = j.attempt + 1, locked_by = 'pgbench', locked_at = now()
FROM next WHERE j.id = next.id
RETURNING j.id AS job_id \gset
UPDATE jobs SET status = 'completed', finished_at = now(), locked_by = NULL WHERE id = :job_id;
SQL

load_before=$(bench_load)
# Machine-wide busy CPU (all processes: pgbench, its backends, anything else running).
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
busy_before=$(busy)
bench_measure "$work/postgres.json" --url "$scratch" --table jobs \
    --units-sql "SELECT count(*) FROM jobs WHERE status = 'completed'" -- \
    "$pgbench_bin" -n -M prepared -c "$clients" -j "$threads" -T "$seconds" -f "$work/lease-complete.sql" "$scratch" \
    > "$work/out.txt" 2> "$work/err.txt" || { cat "$work/err.txt" "$work/out.txt" >&2; exit 1; }
load_after=$(bench_load)
busy_after=$(busy)

tps=$(sed -nE 's/^tps = ([0-9.]+) .*/\1/p' "$work/out.txt" | tail -1)
latency=$(sed -nE 's/^latency average = ([0-9.]+) ms/\1/p' "$work/out.txt")
completed=$(psql -Atq "$scratch" -c "SELECT count(*) FROM jobs WHERE status = 'completed'")
# USER_HZ is 100 on Linux: jiffies / 100 = CPU seconds.
cpu_per_1000=$(awk -v b="$busy_before" -v a="$busy_after" -v n="$completed" 'BEGIN { printf "%.3f", (a - b) / 100 / (n > 0 ? n : 1) * 1000 }')

if $json; then
    printf '{"tps":%s,"steps_per_s":%s,"commits_per_step":2,"clients":%s,"threads":%s,"seconds":%s,"rows":%s,"completed":%s,"latency_avg_ms":%s,"machine_cpu_per_1000_steps_s":%s,"load_average_1m":[%s,%s],"postgres":%s}\n' \
        "$tps" "$tps" "$clients" "$threads" "$seconds" "$rows" "$completed" "${latency:-null}" "$cpu_per_1000" "$load_before" "$load_after" "$(cat "$work/postgres.json")"
else
    echo "pgbench lease+complete: $clients clients, $threads threads, $seconds s, $rows rows"
    echo "  tps (one lease + one complete) = steps/s: $tps"
    echo "  Postgres commits/s: $(awk -v t="$tps" 'BEGIN { printf "%.0f", 2 * t }') (2 per step)"
    echo "  jobs completed: $completed; average latency per step: ${latency} ms"
    echo "  machine-wide CPU per 1000 steps (every process): $cpu_per_1000 s"
    jq -r 'def r: . * 1000 | round / 1000; "  Postgres per job: CPU \(.cpu_ms_per_unit.backends // null | r) ms (backends), \(.cpu_ms_per_unit.background // null | r) ms (background), \(.cpu_ms_per_unit.cluster // null | r) ms (cluster); WAL \(.wal_bytes_per_unit | round) bytes; commits \(.commits_per_unit | r); tuples written \(.tuples_written_per_unit | r); HOT updates of jobs \((.hot_update_share // 0) * 100 | round) %"' "$work/postgres.json"
    echo "  load average (1 m): $load_before before, $load_after after"
fi
