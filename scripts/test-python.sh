#!/usr/bin/env bash
# Check and test the Python remote executor: fresh stubs, mypy --strict, pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="$(scripts/python-env.sh | tail -n 1)"

echo "test-python: checking that the generated Python stubs are fresh" >&2
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
scripts/proto-python.sh "$tmp"
for f in __init__.py v1/__init__.py v1/executor_pb2.py v1/executor_pb2.pyi v1/executor_pb2_grpc.py; do
  if ! diff -q "$tmp/rara/$f" "executors/python/src/rara/$f" >/dev/null 2>&1; then
    echo "stale generated Python stubs: run make proto (differs: executors/python/src/rara/$f)" >&2
    exit 1
  fi
done

cd executors/python
echo "test-python: mypy --strict rara_worker" >&2
"$PY" -m mypy --strict -p rara_worker
echo "test-python: pytest" >&2
"$PY" -m pytest -q "$@"
