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
  scripts/local-credentials.sh .dev/credentials
  echo "export RARA_REMOTE_EXECUTORS=\$([ -n \"\${RARA_LOCAL_TLS_CERT:-}\" ] && echo https || echo http)://127.0.0.1:$port"
  exit 0
fi
mkdir -p .dev
scripts/ensure-postgres.sh
cargo build --quiet -p rara
rara="$(rara_bin)"
localstack_up
# Auth on, as deployed: a local token and attempt key, and TLS with a local CA when openssl is
# there (scripts/local-credentials.sh; `scripts/dev.sh env` prints them for other terminals).
eval "$(scripts/local-credentials.sh .dev/credentials)"
tls=() scheme=http
if [ -n "${RARA_LOCAL_TLS_CERT:-}" ]; then
  tls=(--tls-cert "$RARA_LOCAL_TLS_CERT" --tls-key "$RARA_LOCAL_TLS_KEY") scheme=https
fi
python=$(scripts/python-env.sh | tail -n 1)
start_bg "$python" -m rara_worker --host 127.0.0.1 --port "$port" --artifacts-dir .dev/artifacts \
  --data-dir .dev/data "${tls[@]}" >.dev/python.out 2>.dev/python.log
export RARA_REMOTE_EXECUTORS=$scheme://127.0.0.1:$port
"$rara" migrate
echo "rara dev: Python executor on $RARA_REMOTE_EXECUTORS; logs in .dev/; Ctrl-C to stop"
start_bg "$rara" dev --queue-name rara-dev
wait "$BG_PID"
