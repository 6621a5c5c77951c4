#!/usr/bin/env bash
# `make demo`: rara end to end on the local default stack. Installs what is missing into
# project-local cached places, starts Postgres (if needed), LocalStack's SQS, the Python
# executor and `rara dev` (the scheduler and executor handlers), submits the demo
# workflow, watches it live, prints the final table, and stops everything it started.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

started=$(date +%s)
mkdir -p .demo
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/rara_demo}
export RARA_SCHEDULER_POLL_MS=${RARA_SCHEDULER_POLL_MS:-200}
export RARA_LOG=${RARA_LOG:-warn}

step() { printf '\n== %s\n' "$*"; }

step "Postgres"
scripts/ensure-postgres.sh
echo "using $(sed -E 's#//[^@]*@#//#' <<<"$DATABASE_URL")"

step "building rara (the first build takes a few minutes)"
cargo build --quiet -p rara
rara="$(rara_bin)"

step "LocalStack (a local SQS API)"
localstack_up

step "the Python executor"
python=$(scripts/python-env.sh | tail -n 1)
start_bg "$python" -m rara_worker --host 127.0.0.1 --port 0 --artifacts-dir .demo/artifacts \
  --data-dir .demo/data >.demo/python.out 2>.demo/python.log
for _ in $(seq 1 100); do grep -q '^listening on' .demo/python.out 2>/dev/null && break; sleep 0.1; done
endpoint="http://$(sed -n 's/^listening on //p' .demo/python.out | head -n1)"
[ "$endpoint" != "http://" ] || die "the Python executor did not start; see .demo/python.log"
export RARA_REMOTE_EXECUTORS=$endpoint
"$rara" capabilities "$endpoint"

step "migrating and starting rara dev (scheduler + executor)"
"$rara" migrate
start_bg "$rara" dev --queue-name rara-demo >.demo/dev.log 2>&1

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
