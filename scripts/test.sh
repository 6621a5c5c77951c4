#!/usr/bin/env bash
# `make test`: the whole suite against real parts: Postgres (the machine's), LocalStack's
# SQS (started here if nothing answers, stopped again afterwards), the Python executor.
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

echo "== Rust tests"
cargo test --workspace --all-targets
echo "== Python tests"
scripts/test-python.sh
