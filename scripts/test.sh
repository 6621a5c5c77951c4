#!/usr/bin/env bash
# `make test`: the whole suite against real parts: Postgres (the machine's), LocalStack's
# SQS (started here if nothing answers, stopped again afterwards), the Python executor; then
# the IAM check of every AWS call the suites made (scripts/check-iam.sh); then the clients
# (scripts/test-clients.sh) against a live `rara ui` and `rara dev`.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

export DATABASE_URL=${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
scripts/ensure-postgres.sh
localstack_up

# The Python executor's virtualenv (the remote-executor tests start the real server).
scripts/python-env.sh >/dev/null
# Chromium and chromedriver for the console's browser test (installed once).
scripts/browser-env.sh

# Every AWS call the Rust suites make is recorded, then evaluated against the IAM policy
# infra/template.yaml gives its caller's role (LocalStack enforces no IAM; see
# docs/src/development.md, "The IAM check").
CALLS="$(target_dir)/aws-calls"
rm -rf "$CALLS"
scripts/check-iam.sh install

echo "== Rust tests"
RARA_AWS_CALL_LOG="$CALLS" cargo test --workspace --all-targets --no-fail-fast
# The Python executor's artifact store records its S3 calls too (rara_worker/call_log.py),
# as the executor service's task role: those of the Python tests and of the servers the Rust
# tests started.
echo "== Python tests"
RARA_AWS_CALL_LOG="$CALLS" scripts/test-python.sh
echo "== IAM check"
scripts/check-iam.sh test >/dev/null
# The ECS agent's calls for the executor service stack (its own template) are checked too.
scripts/check-iam.sh "$CALLS" infra/tests/executor_service_calls.jsonl
echo "== Client tests"
scripts/test-clients.sh
