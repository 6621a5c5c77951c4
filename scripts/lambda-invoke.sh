#!/usr/bin/env bash
# Runs both functions under `cargo lambda watch` (the Lambda runtime API emulator) and
# invokes each once with the committed fixtures, against the local stack:
#   scripts/lambda-invoke.sh
# Needs cargo-lambda (installed into .venv-tools by scripts/build-lambdas.sh --install-only).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

scripts/build-lambdas.sh --install-only >/dev/null
export PATH="$PWD/.venv-tools/bin:$PATH"
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/rara_demo}
scripts/ensure-postgres.sh
localstack_up
cargo build --quiet -p rara -p scheduler -p executor
rara="$(rara_bin)"
"$rara" migrate >/dev/null
eval "$("$rara" queue create --name rara-lambda-invoke)"
export RARA_SCHEDULER_BUDGET_SECONDS=0
port=${CARGO_LAMBDA_PORT:-9000}
start_bg cargo lambda watch --invoke-port "$port" >.lambda-watch.log 2>&1
for _ in $(seq 1 300); do (echo >/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.2; done
echo "== scheduler <- tests/fixtures/scheduled-event.json"
cargo lambda invoke scheduler --invoke-port "$port" --data-file tests/fixtures/scheduled-event.json
echo
echo "== executor <- tests/fixtures/sqs-event.json"
out=$(cargo lambda invoke executor --invoke-port "$port" --data-file tests/fixtures/sqs-event.json)
echo "$out"
# Both fixture messages are dead-lettered (one malformed, one unknown step): none comes back.
grep -q '"batchItemFailures":\[\]' <<<"$out" || die "unexpected executor response"
echo "lambda-invoke: ok"
