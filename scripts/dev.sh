#!/usr/bin/env bash
# `make dev`: keep a local stack up for your own workflows: Postgres, LocalStack's SQS,
# the Python executor on port 50051 and `rara dev` (scheduler + executor). Ctrl-C stops
# everything this script started. In another terminal: `eval "$(scripts/dev.sh env)"`,
# then `rara submit FILE --watch`.
set -euo pipefail
cd "$(dirname "$0")/.."
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/rara}
port=${RARA_DEV_EXECUTOR_PORT:-50051}
if [ "${1:-}" = env ]; then
  scripts/localstack.sh env
  echo "export DATABASE_URL=$DATABASE_URL"
  echo "export PATH=\"$PWD/${CARGO_TARGET_DIR:-target}/debug:\$PATH\""
  exit 0
fi
mkdir -p .dev
pids=()
started_localstack=""
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "$started_localstack" ] && scripts/localstack.sh stop >/dev/null 2>&1 || true
}
trap cleanup EXIT INT TERM
scripts/ensure-postgres.sh
cargo build --quiet -p rara
rara="${CARGO_TARGET_DIR:-target}/debug/rara"
if ! scripts/localstack.sh status >/dev/null 2>&1; then scripts/localstack.sh start; started_localstack=1; fi
eval "$(scripts/localstack.sh env)"
python=$(scripts/python-env.sh | tail -n 1)
"$python" -m rara_worker --host 127.0.0.1 --port "$port" --artifacts-dir .dev/artifacts --data-dir .dev/data >.dev/python.out 2>.dev/python.log &
pids+=($!)
export RARA_REMOTE_EXECUTORS=http://127.0.0.1:$port
"$rara" migrate
echo "rara dev: Python executor on $RARA_REMOTE_EXECUTORS; logs in .dev/; Ctrl-C to stop"
"$rara" dev --queue-name rara-dev &
pids+=($!)
wait "${pids[-1]}"
