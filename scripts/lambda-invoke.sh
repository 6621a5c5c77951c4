#!/usr/bin/env bash
# Runs both functions under `cargo lambda watch` (the Lambda runtime API emulator) and
# invokes each once with the committed fixtures, against the local stack:
#   scripts/lambda-invoke.sh
# Needs cargo-lambda (installed into .venv-tools by scripts/build-lambdas.sh --install-only).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build-lambdas.sh --install-only >/dev/null
export PATH="$PWD/.venv-tools/bin:$PATH"
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/rara_demo}
scripts/ensure-postgres.sh
started_localstack=""
if ! scripts/localstack.sh status >/dev/null 2>&1; then scripts/localstack.sh start; started_localstack=1; fi
eval "$(scripts/localstack.sh env)"
cargo build --quiet -p rara -p scheduler -p executor
rara="${CARGO_TARGET_DIR:-target}/debug/rara"
"$rara" migrate >/dev/null
eval "$("$rara" queue create --name rara-lambda-invoke)"
export RARA_SCHEDULER_BUDGET_SECONDS=0
port=${CARGO_LAMBDA_PORT:-9000}
cargo lambda watch --invoke-port "$port" >.lambda-watch.log 2>&1 &
watch_pid=$!
cleanup() {
  kill "$watch_pid" 2>/dev/null || true
  wait "$watch_pid" 2>/dev/null || true
  [ -n "$started_localstack" ] && scripts/localstack.sh stop >/dev/null 2>&1 || true
}
trap cleanup EXIT
for _ in $(seq 1 300); do (echo >/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.2; done
echo "== scheduler <- tests/fixtures/scheduled-event.json"
cargo lambda invoke scheduler --invoke-port "$port" --data-file tests/fixtures/scheduled-event.json
echo
echo "== executor <- tests/fixtures/sqs-event.json"
out=$(cargo lambda invoke executor --invoke-port "$port" --data-file tests/fixtures/sqs-event.json)
echo "$out"
# Both fixture messages are dead-lettered (one malformed, one unknown step): none comes back.
grep -q '"batchItemFailures":\[\]' <<<"$out" || { echo "unexpected executor response" >&2; exit 1; }
echo "lambda-invoke: ok"
