#!/usr/bin/env bash
# `make bench`: build rara-bench in release, then, back to back in one run on the same Postgres:
# the pgbench baseline (a naive lease-one-row-then-complete-it queue, 16 clients), Graphile
# Worker 0.18 with its batching on (scripts/graphile-bench.sh) and `rara-bench flat` on the
# Postgres path over the grid (issue 50): each operation of BENCH_OPERATIONS (noop: the quick
# path; nothing: the ordinary path with a step that returns at once; sleep: `sleep 0`, the
# ordinary path with a wait for the runtime's next timer tick) at each executor batch size of BENCH_BATCHES and
# each RARA_STEPS_PER_MESSAGE of BENCH_PACKING; then a table of their throughputs, the ratios,
# and the Postgres work per step of each (CPU, WAL bytes, commits, tuples written), with the
# load average, and the grid (rows: operation and batch; cells: steps per message; Graphile's
# figure of the same run beside each row). See BENCHMARKS.md.
#
# Environment:
#   BENCH_PG          machine (default: the server of DATABASE_URL, the machine's on 5432),
#                     own (a throw-away cluster of scripts/bench-postgres.sh on 55432, with
#                     autovacuum on; started and removed here unless it was running) or both
#   DATABASE_URL      the machine's server (scratch databases are created and dropped)
#   BENCH_STEPS (20000; also Graphile's jobs), BENCH_BATCHES ("1 10 100": the event source's
#   BatchSize; above 10 gathered within a 20 ms batching window), BENCH_PACKING ("1 10 100":
#   the scheduler's RARA_STEPS_PER_MESSAGE), BENCH_OPERATIONS ("noop nothing sleep"), BENCH_EXECUTORS (2),
#   BENCH_RUNS (2), BENCH_GRAPHILE (1; 0 skips it), and the PGBENCH_* variables of
#   scripts/pgbench-lease-complete.sh and GRAPHILE_* of scripts/graphile-bench.sh.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

steps=${BENCH_STEPS:-20000}
batches=${BENCH_BATCHES:-1 10 100}
packings=${BENCH_PACKING:-1 10 100}
operations=${BENCH_OPERATIONS:-noop nothing sleep}
executors=${BENCH_EXECUTORS:-2}
runs=${BENCH_RUNS:-2}
graphile=${BENCH_GRAPHILE:-1}
machine_url=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
case ${BENCH_PG:-machine} in
machine) servers=(machine) ;;
own) servers=(own) ;;
both) servers=(machine own) ;;
*) die "BENCH_PG is machine, own or both" ;;
esac

cargo build --release -p rara-bench
bench="$(target_dir)/release/rara-bench"
work=$(mktemp -d)
on_exit rm -rf "$work"

own_up() {
    if ! scripts/bench-postgres.sh status >/dev/null 2>&1; then
        scripts/bench-postgres.sh start >/dev/null
        on_exit scripts/bench-postgres.sh stop
    fi
    eval "$(scripts/bench-postgres.sh env)"
}

for server in "${servers[@]}"; do
    if [[ $server == own ]]; then own_up; else export DATABASE_URL=$machine_url; scripts/ensure-postgres.sh; fi
    settings=$(psql -AtqX "$DATABASE_URL" -c "SELECT 'Postgres ' || current_setting('server_version') || ', autovacuum ' || current_setting('autovacuum') || ', shared_buffers ' || current_setting('shared_buffers') || ', synchronous_commit ' || current_setting('synchronous_commit') || ', pg_stat_statements ' || (current_setting('shared_preload_libraries') ~ 'pg_stat_statements')")
    echo "=== server: $server ($DATABASE_URL): $settings"
    echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
    for i in $(seq 1 "$runs"); do
        echo "--- run $i/$runs ($server)"
        scripts/pgbench-lease-complete.sh --json > "$work/pgbench.json"
        echo "pgbench: $(cat "$work/pgbench.json")"
        reports=("$work/pgbench.json")
        if [[ $graphile != 0 ]]; then
            GRAPHILE_JOBS=$steps scripts/graphile-bench.sh --json > "$work/graphile.json"
            echo "graphile: $(cat "$work/graphile.json")"
            reports+=("$work/graphile.json")
        fi
        for operation in $operations; do
            for batch in $batches; do
                for packing in $packings; do
                    out="$work/rara-$operation-$batch-$packing.json"
                    RARA_STEPS_PER_MESSAGE=$packing "$bench" flat --steps "$steps" --batch "$batch" \
                        --executors "$executors" --operation "$operation" --json > "$out"
                    # The grid's column: the setting (the report measures what was sent).
                    python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); r["requested_steps_per_message"] = int(sys.argv[2]); json.dump(r, open(sys.argv[1], "w"))' "$out" "$packing"
                    echo "rara ($operation, batch $batch, $packing steps per message): $(cat "$out")"
                    reports+=("$out")
                done
            done
        done
        python3 scripts/bench-table.py "${reports[@]}"
    done
done
