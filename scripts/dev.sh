#!/usr/bin/env bash
# `make dev`: keep a local stack up for your own workflows: Postgres, LocalStack's SQS,
# the Python executor on port 50051 and `rara dev` (scheduler + executor). Ctrl-C stops
# everything this script started. In another terminal: `eval "$(scripts/dev.sh env)"`,
# then `rara submit FILE --watch`.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/rara}
port=${RARA_DEV_EXECUTOR_PORT:-50051}
if [ "${1:-}" = env ]; then
  scripts/localstack.sh env
  echo "export DATABASE_URL=$DATABASE_URL"
  echo "export PATH=\"$(dirname "$(rara_bin)"):\$PATH\""
  exit 0
fi
mkdir -p .dev
scripts/ensure-postgres.sh
cargo build --quiet -p rara
rara="$(rara_bin)"
localstack_up
python=$(scripts/python-env.sh | tail -n 1)
start_bg "$python" -m rara_worker --host 127.0.0.1 --port "$port" --artifacts-dir .dev/artifacts \
  --data-dir .dev/data >.dev/python.out 2>.dev/python.log
export RARA_REMOTE_EXECUTORS=http://127.0.0.1:$port
"$rara" migrate
echo "rara dev: Python executor on $RARA_REMOTE_EXECUTORS; logs in .dev/; Ctrl-C to stop"
start_bg "$rara" dev --queue-name rara-dev
wait "$BG_PID"
