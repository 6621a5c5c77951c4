#!/usr/bin/env bash
# CI: the contract's generated code is fresh, `buf lint` passes, and nothing breaks the
# wire contract of the main branch (`buf breaking`).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "check-proto: make proto on a clean tree must change nothing"
make --no-print-directory proto >/dev/null
if ! git diff --quiet -- executors/python/src/rara; then
  git --no-pager diff --stat -- executors/python/src/rara
  echo "error: generated Python stubs are stale: run make proto and commit the result" >&2
  exit 1
fi

buf=(npx --yes @bufbuild/buf@1.75.0)
echo "check-proto: buf lint"
"${buf[@]}" lint
if git rev-parse --verify --quiet main >/dev/null && git cat-file -e main:proto 2>/dev/null; then
  echo "check-proto: buf breaking against main"
  "${buf[@]}" breaking --against '.git#branch=main,subdir=proto'
fi
echo "check-proto: ok"
