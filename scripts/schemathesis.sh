#!/usr/bin/env bash
# The OpenAPI document against the live server: schemathesis generates requests from
# docs/openapi.json (as served at /openapi.json) and checks every answer against it:
# RARA_SCHEMATHESIS_EXAMPLES (100) cases per operation, generated deterministically so a run
# makes the requests the last one made and finds what it found, and never more than
# RARA_SCHEMATHESIS_SECONDS (300; `--max-time` would fuzz on until then, so it bounds from
# outside). Needs RARA_API_URL and RARA_API_TOKEN (scripts/test-clients.sh runs it under
# clients/python/tests/stack.py). Prints the number of requests made; fails on a finding not
# listed, with its reason, in scripts/schemathesis-findings.txt.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

: "${RARA_API_URL:?RARA_API_URL: the API to test}" "${RARA_API_TOKEN:?RARA_API_TOKEN: its token}"
VENV=.venv-schemathesis
PIN=schemathesis==4.32.5
venv_pip "$VENV" "$PIN" "$PIN"
# The run's output and NDJSON report are kept for a look at the findings.
reports="$(target_dir)/schemathesis"
rm -rf "$reports" && mkdir -p "$reports"
status=0
# Run from the report folder: schemathesis leaves a .schemathesis cache where it runs.
st="$PWD/$VENV/bin/schemathesis"
(cd "$reports" && timeout "${RARA_SCHEMATHESIS_SECONDS:-300}" "$st" run "$RARA_API_URL/openapi.json" \
  -H "Authorization: Bearer $RARA_API_TOKEN" --checks all --generation-deterministic \
  --max-examples "${RARA_SCHEMATHESIS_EXAMPLES:-100}" \
  --report ndjson --report-dir "$reports" >"$reports/out.txt" 2>&1) || status=$?
if [ "$status" -ne 0 ] && [ "$status" -ne 1 ]; then
  cat "$reports/out.txt" >&2
  die "schemathesis did not run (exit $status)"
fi
python3 scripts/schemathesis-report.py scripts/schemathesis-findings.txt "$reports"/*.ndjson \
  || die "a finding not listed in scripts/schemathesis-findings.txt: see $reports/out.txt"
