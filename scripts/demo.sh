#!/usr/bin/env bash
# `make demo`: rara end to end on the local default stack. Installs what is missing into
# project-local cached places, starts Postgres (if needed), LocalStack's SQS, the Python
# executor and `rara dev` (the scheduler and executor handlers), submits the demo
# workflow, watches it live, prints the final table, and stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
mkdir -p .demo
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/rara_demo}
export RARA_SCHEDULER_POLL_MS=${RARA_SCHEDULER_POLL_MS:-200}
export RARA_LOG=${RARA_LOG:-warn}

pids=()
started_localstack=""
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  [ -n "$started_localstack" ] && scripts/localstack.sh stop >/dev/null 2>&1 || true
}
trap cleanup EXIT INT TERM

step() { printf '\n== %s\n' "$*"; }

step "Postgres"
scripts/ensure-postgres.sh
echo "using $(sed -E 's#//[^@]*@#//#' <<<"$DATABASE_URL")"

step "building rara (the first build takes a few minutes)"
cargo build --quiet -p rara
rara="${CARGO_TARGET_DIR:-target}/debug/rara"

step "LocalStack (a local SQS API)"
if ! scripts/localstack.sh status >/dev/null 2>&1; then
  scripts/localstack.sh start
  started_localstack=1
fi
eval "$(scripts/localstack.sh env)"

step "the Python executor"
python=$(scripts/python-env.sh | tail -n 1)
"$python" -m rara_worker --host 127.0.0.1 --port 0 --artifacts-dir .demo/artifacts --data-dir .demo/data >.demo/python.out 2>.demo/python.log &
pids+=($!)
for _ in $(seq 1 100); do grep -q '^listening on' .demo/python.out 2>/dev/null && break; sleep 0.1; done
endpoint="http://$(sed -n 's/^listening on //p' .demo/python.out | head -n1)"
[ "$endpoint" != "http://" ] || { echo "the Python executor did not start; see .demo/python.log" >&2; exit 1; }
export RARA_REMOTE_EXECUTORS=$endpoint
"$rara" capabilities "$endpoint"

step "migrating and starting rara dev (scheduler + executor)"
"$rara" migrate
"$rara" dev --queue-name rara-demo >.demo/dev.log 2>&1 &
pids+=($!)

step "submitting examples/demo.yaml and watching it"
status=0
"$rara" submit --watch examples/demo.yaml || status=$?

step "artifacts"
ls -l .demo/artifacts 2>/dev/null | tail -n +2 || true
echo
if [ "$status" -eq 0 ]; then
  echo "demo run succeeded in $(( $(date +%s) - started )) s; logs in .demo/"
else
  echo "demo run did not succeed (exit $status); see .demo/dev.log and .demo/python.log" >&2
fi
exit "$status"
