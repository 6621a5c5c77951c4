#!/usr/bin/env bash
# `make test`: the whole suite against real parts: Postgres (the machine's), LocalStack's
# SQS (started here if nothing answers, stopped again afterwards), the Python executor.
set -euo pipefail
cd "$(dirname "$0")/.."

export DATABASE_URL=${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
scripts/ensure-postgres.sh

started_localstack=""
if ! scripts/localstack.sh status >/dev/null 2>&1; then
  scripts/localstack.sh start
  started_localstack=1
fi
cleanup() { [ -n "$started_localstack" ] && scripts/localstack.sh stop >/dev/null 2>&1 || true; }
trap cleanup EXIT
eval "$(scripts/localstack.sh env)"

# The Python executor's virtualenv (the remote-executor tests start the real server).
scripts/python-env.sh >/dev/null

echo "== Rust tests"
cargo test --workspace --all-targets
echo "== Python tests"
scripts/test-python.sh
