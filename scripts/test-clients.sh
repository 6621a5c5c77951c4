#!/usr/bin/env bash
# The clients' suites against a live rara (`make test` runs it; alone: scripts/test-clients.sh):
# the Python client (clients/python: mypy --strict, then pytest, which starts `rara ui` and
# `rara dev` with the Python executor on a scratch database, as scripts/demo.sh does, and runs
# examples/python/rebuild_index.py), then the TypeScript client (clients/typescript: npm ci, then
# npm test: types fresh from docs/openapi.json, its suite and examples/typescript/rebuild-index.ts
# against a live stack started by clients/python/tests/stack.py), then schemathesis against the
# live API (scripts/schemathesis.sh: the number of requests, the findings listed or new).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
scripts/ensure-postgres.sh
localstack_up
cargo build --quiet --workspace --bin rara
RARA_BIN="$(rara_bin)"
RARA_EXECUTOR_PYTHON="$(scripts/python-env.sh | tail -n 1)"
export RARA_BIN RARA_EXECUTOR_PYTHON
PY="$(scripts/clients-env.sh | tail -n 1)"

(
  cd clients/python
  log "mypy --strict rara_client, its tests and the example"
  "$PY" -m mypy --strict src/rara_client tests ../../examples/python/rebuild_index.py
  log "pytest clients/python"
  "$PY" -m pytest -q "$@"
)
(
  cd clients/typescript
  log "npm ci, then npm test against a live rara ui and rara dev"
  npm ci --no-audit --no-fund --loglevel=error
  "$PY" ../python/tests/stack.py npm test
)
log "schemathesis: docs/openapi.json against the live API"
"$PY" clients/python/tests/stack.py scripts/schemathesis.sh
