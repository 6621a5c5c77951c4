#!/usr/bin/env bash
# Graphile Worker 0.18, side by side with rara-bench (issue 24; BENCHMARKS.md, "Side by side
# with Graphile Worker 0.18"): JOBS noop jobs drained by one worker with its batching on.
#
# Installs tools/bench/graphile (graphile-worker, exact version and lockfile) with `npm ci`
# into $HOME/.cache/rara/graphile-bench, creates a scratch database on the server of
# DATABASE_URL, runs Graphile Worker's migrations and adds the jobs (before the clock), then
# times a worker from its start until no job is left (completed jobs are deleted), with the
# Postgres work per job measured around it by scripts/pg-figures.py (as for pgbench).
#
# Usage: scripts/graphile-bench.sh [--json] [soak [MINUTES] [RATE]]
#   soak: the same worker for MINUTES (10) minutes while RATE (3000) jobs a second are added,
#   one addJobs call every 50 ms (as `rara-bench soak` submits); each minute's add → start
#   (the job's run_at to its task's start, ms), to set beside `make bench-soak`.
# Environment: DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres),
#   GRAPHILE_JOBS (20000), GRAPHILE_CONCURRENCY (24), GRAPHILE_LOCAL_QUEUE (200),
#   GRAPHILE_COMPLETE_BATCH_DELAY (0, also failJobBatchDelay), GRAPHILE_MAX_POOL (10).
# Needs Node 20 or later and npm (the npm registry, the first time).
set -euo pipefail
# shellcheck source=scripts/bench-lib.sh
source "$(dirname "$0")/bench-lib.sh"

json=false
[[ "${1:-}" == "--json" ]] && { json=true; shift; }
soak=false
[[ "${1:-}" == "soak" ]] && soak=true
minutes=${2:-10}
rate=${3:-3000}
jobs=${GRAPHILE_JOBS:-20000}

command -v node >/dev/null || die "node is missing (Node 20 or later)"
install=$HOME/.cache/rara/graphile-bench
key=$(cat tools/bench/graphile/package.json tools/bench/graphile/package-lock.json | sha256sum | cut -d' ' -f1)
if ! stamp_matches "$install/.rara-stamp" "$key"; then
    log "npm ci into $install"
    mkdir -p "$install"
    cp tools/bench/graphile/package.json tools/bench/graphile/package-lock.json "$install/"
    (cd "$install" && npm ci --no-audit --no-fund --loglevel=error >&2)
    stamp_write "$install/.rara-stamp" "$key"
fi
export NODE_PATH="$install/node_modules"

work=$(mktemp -d)
on_exit rm -rf "$work"
bench_scratch_db rara_graphile
if $soak; then
    DATABASE_URL=$BENCH_DB_URL node tools/bench/graphile/bench.cjs soak "$minutes" "$rate" > "$work/soak.json"
    if $json; then
        cat "$work/soak.json"
    else
        jq -r 'def ms: if . == null then "n/a" else tostring end;
          def pad: tostring | (" " * (6 - length)) + .;
          "graphile-worker \(.version) (node \(.node)): \(.jobs) noop jobs added at \(.rate)/s for \(.minutes) min, concurrency \(.settings.concurrency), localQueue.size \(.settings.localQueueSize)",
          "  add → start (ms)  p50 \(.add_to_start_ms.p50 | ms) p95 \(.add_to_start_ms.p95 | ms) p99 \(.add_to_start_ms.p99 | ms) max \(.add_to_start_ms.max | ms)",
          "  minute    jobs  p50 ms  p99 ms  max ms",
          (.per_minute | to_entries[] | "  \(.key + 1 | pad)  \(.value.jobs // 0 | pad)  \(.value.p50 | ms | pad)  \(.value.p99 | ms | pad)  \(.value.max | ms | pad)")' "$work/soak.json"
    fi
    exit 0
fi
DATABASE_URL=$BENCH_DB_URL node tools/bench/graphile/bench.cjs prepare "$jobs"
DATABASE_URL=$BENCH_DB_URL bench_measure "$work/postgres.json" --url "$BENCH_DB_URL" --units "$jobs" \
    --table _private_jobs -- node tools/bench/graphile/bench.cjs run "$jobs" > "$work/run.json"

report=$(jq -c --slurpfile pg "$work/postgres.json" '. + {steps_per_s: .jobs_per_s, postgres: $pg[0], load_average_1m: $pg[0].load_average_1m}' "$work/run.json")
if $json; then
    echo "$report"
else
    jq -r 'def r: . * 1000 | round / 1000;
      "graphile-worker \(.version) (node \(.node)): \(.jobs) noop jobs, concurrency \(.settings.concurrency), localQueue.size \(.settings.localQueueSize), completeJobBatchDelay \(.settings.completeJobBatchDelay), maxPoolSize \(.settings.maxPoolSize)",
      "  jobs/s: \(.jobs_per_s | round) (\(.elapsed_s | r) s)",
      "  Postgres per job: CPU \(.postgres.cpu_ms_per_unit.backends // null | r) ms (backends), \(.postgres.cpu_ms_per_unit.background // null | r) ms (background), \(.postgres.cpu_ms_per_unit.cluster // null | r) ms (cluster); WAL \(.postgres.wal_bytes_per_unit | round) bytes; commits \(.postgres.commits_per_unit | r); tuples written \(.postgres.tuples_written_per_unit | r); HOT updates of _private_jobs \((.postgres.hot_update_share // 0) * 100 | round) %",
      "  load average (1 m): \(.load_average_1m[0]) before, \(.load_average_1m[1]) after"' <<<"$report"
fi
