#!/usr/bin/env bash
# Regenerate the Python stubs of proto/rara/v1/executor.proto.
# Usage: scripts/proto-python.sh [OUT_DIR]   (default: executors/python/src)
# The output is deterministic: running it twice changes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT="${1:-executors/python/src}"
PY="$(scripts/python-env.sh | tail -n 1)"

echo "proto-python: generating stubs into $OUT/rara/v1" >&2
mkdir -p "$OUT/rara/v1"
"$PY" -m grpc_tools.protoc -I proto \
  --python_out="$OUT" --pyi_out="$OUT" --grpc_python_out="$OUT" \
  proto/rara/v1/executor.proto
for pkg in "$OUT/rara" "$OUT/rara/v1"; do
  echo '"""Generated from proto/ by scripts/proto-python.sh. Do not edit."""' >"$pkg/__init__.py"
done
echo "proto-python: done" >&2
