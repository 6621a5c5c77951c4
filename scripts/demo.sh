#!/usr/bin/env bash
# `make demo`: migrate a local database, submit the demo workflow and show it.
set -euo pipefail
cd "$(dirname "$0")/.."
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/rara_demo}
scripts/ensure-postgres.sh
echo "== building rara"
cargo build --quiet -p rara
rara=${CARGO_TARGET_DIR:-target}/debug/rara
echo "== migrating $(sed -E 's#//[^@]*@#//#' <<<"$DATABASE_URL")"
"$rara" migrate
echo "== submitting examples/demo.yaml"
run_id=$("$rara" submit examples/demo.yaml)
echo "run $run_id"
"$rara" status "$run_id"
