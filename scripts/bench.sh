#!/usr/bin/env bash
# `make bench`: build rara-bench in release, then in the same session run the pgbench baseline
# (a naive lease-one-row-then-complete-it queue, 16 clients) and `rara-bench flat` on the
# Postgres path at each executor batch size of BENCH_BATCHES, and print the ratio of their
# throughputs. See BENCHMARKS.md.
#
# Environment: DATABASE_URL (the server to use; scratch databases are created and dropped),
#   BENCH_STEPS (40000), BENCH_BATCHES ("10 100": the event source's BatchSize; above 10
#   gathered within a 20 ms batching window), BENCH_EXECUTORS (2), BENCH_RUNS (2),
#   and the PGBENCH_* variables of scripts/pgbench-lease-complete.sh.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

steps=${BENCH_STEPS:-40000}
batches=${BENCH_BATCHES:-10 100}
executors=${BENCH_EXECUTORS:-2}
runs=${BENCH_RUNS:-2}
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}

scripts/ensure-postgres.sh
cargo build --release -p rara-bench
bench="$(target_dir)/release/rara-bench"

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(psql -Atq "$DATABASE_URL" -c 'SHOW server_version'), load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq 1 "$runs"); do
    echo "--- run $i/$runs"
    baseline=$(scripts/pgbench-lease-complete.sh --json)
    echo "pgbench: $baseline"
    for batch in $batches; do
        report=$("$bench" flat --steps "$steps" --batch "$batch" --executors "$executors" --json)
        echo "rara (batch $batch): $report"
        python3 - "$baseline" "$report" <<'PY'
import json, sys
base, rara = json.loads(sys.argv[1]), json.loads(sys.argv[2])
ratio = rara["steps_per_s"] / base["steps_per_s"]
lat = rara["latency_ms"]
print(f"batch {rara['batch']}: rara {rara['steps_per_s']:.0f} steps/s vs pgbench {base['steps_per_s']:.0f} steps/s: "
      f"{ratio:.2f}x (target >= 3x); commits/step {rara['commits_per_step']:.3f} vs 2 (target <= 0.35 at batch 10); "
      f"due->claimed p50/p95/p99 {lat['p50']:.0f}/{lat['p95']:.0f}/{lat['p99']:.0f} ms (backlog); "
      f"CPU/1000 steps rara {rara['cpu']['process_per_1000_steps_s']:.3f} s + Postgres "
      f"{rara['cpu']['postgres_per_1000_steps_s'] or float('nan'):.3f} s; peak RSS {rara['peak_rss_mb']:.0f} MiB; "
      f"AWS ${rara['aws_estimate']['total_usd_per_million_steps']:.3f} per million steps")
PY
    done
done
