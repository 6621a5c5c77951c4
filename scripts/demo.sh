#!/usr/bin/env bash
# `make demo`: rara end to end on the local default stack. Installs what is missing into
# project-local cached places, starts Postgres (if needed), LocalStack's SQS and S3 (the
# artifact store, RARA_ARTIFACTS_URI), the Python
# executor, a web server with the article the demo fetches, and `rara dev` (the scheduler and
# executor handlers), submits the demo workflow (data flow: fetch → split → a map step →
# merge), watches it live, prints the final table, and stops everything it started.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

started=$(date +%s)
mkdir -p .demo
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/rara_demo}
export RARA_SCHEDULER_POLL_MS=${RARA_SCHEDULER_POLL_MS:-200}
export RARA_LOG=${RARA_LOG:-warn}

step() { printf '\n== %s\n' "$*"; }

step "Postgres"
scripts/ensure-postgres.sh
echo "using $(sed -E 's#//[^@]*@#//#' <<<"$DATABASE_URL")"

step "building rara (the first build takes a few minutes)"
cargo build --quiet -p rara
rara="$(rara_bin)"

step "LocalStack (a local SQS API)"
localstack_up

step "the artifact store (a bucket in LocalStack's S3)"
python=$(scripts/python-env.sh | tail -n 1)
# The same store for rara and the Python executor: artifacts and large outputs land in S3.
export RARA_ARTIFACTS_URI=${RARA_ARTIFACTS_URI:-s3://rara-demo-artifacts/demo}
bucket=${RARA_ARTIFACTS_URI#s3://}
bucket=${bucket%%/*}
"$python" - "$bucket" <<'PY'
import sys, boto3
from botocore.config import Config
s3 = boto3.client("s3", config=Config(s3={"addressing_style": "path"}))
try:
    s3.create_bucket(Bucket=sys.argv[1])
except s3.exceptions.BucketAlreadyOwnedByYou:
    pass
PY
echo "RARA_ARTIFACTS_URI=$RARA_ARTIFACTS_URI"

step "the Python executor (a local token and CA: auth on, as deployed)"
eval "$(scripts/local-credentials.sh .demo/credentials)"
tls=() scheme=http
if [ -n "${RARA_LOCAL_TLS_CERT:-}" ]; then
  tls=(--tls-cert "$RARA_LOCAL_TLS_CERT" --tls-key "$RARA_LOCAL_TLS_KEY") scheme=https
fi
start_bg "$python" -m rara_worker --host 127.0.0.1 --port 0 --artifacts-dir .demo/artifacts \
  --data-dir .demo/data "${tls[@]}" >.demo/python.out 2>.demo/python.log
for _ in $(seq 1 100); do grep -q '^listening on' .demo/python.out 2>/dev/null && break; sleep 0.1; done
address=$(sed -n 's/^listening on //p' .demo/python.out | head -n1)
[ -n "$address" ] || die "the Python executor did not start; see .demo/python.log"
endpoint="$scheme://$address"
export RARA_REMOTE_EXECUTORS=$endpoint
"$rara" capabilities "$endpoint"

step "a local web server with the article the demo fetches"
mkdir -p .demo/web
cat >.demo/web/article.txt <<'TEXT'
rara is a serverless workflow-step executor. A scheduler leases due steps in Postgres
and sends them over SQS; an executor claims each one and runs it.

Postgres is the source of truth. SQS only delivers: a message that arrives twice, late or
after its lease was lost runs nothing, because every write is fenced.

Steps hand data to each other. A step's input may take the output of a step it depends
on, and a map step runs once per element of a list, a few at a time.

Long steps run on a remote executor and outlive the Lambda invocation that started them.
TEXT
start_bg "$python" -u -m http.server --bind 127.0.0.1 --directory .demo/web 0 >.demo/web.out 2>&1
for _ in $(seq 1 100); do grep -q 'port [0-9]' .demo/web.out 2>/dev/null && break; sleep 0.1; done
web_port=$(sed -n 's/.* port \([0-9]*\).*/\1/p' .demo/web.out | head -n1)
[ -n "$web_port" ] || die "the demo's web server did not start; see .demo/web.out"
article="http://127.0.0.1:$web_port/article.txt"
echo "serving $article"

step "migrating and starting rara dev (scheduler + executor)"
# http.request refuses loopback unless it is opened: the demo's article is on 127.0.0.1.
export RARA_HTTP_ALLOW_CIDRS=${RARA_HTTP_ALLOW_CIDRS:-127.0.0.1/32}
"$rara" migrate
start_bg "$rara" dev --queue-name rara-demo >.demo/dev.log 2>&1
# Submit only once the runners are up, so the first step starts within a second.
for _ in $(seq 1 300); do grep -q 'scheduler and executor running' .demo/dev.log 2>/dev/null && break; sleep 0.1; done
grep -q 'scheduler and executor running' .demo/dev.log || die "rara dev did not start; see .demo/dev.log"

step "submitting examples/demo.yaml and watching it"
status=0
"$rara" submit --watch examples/demo.yaml --input "url=$article" || status=$?

step "artifacts"
run_id=$("$rara" --json list --limit 1 | python3 -c 'import json,sys; runs=json.load(sys.stdin); print(runs[0]["id"] if runs else "")')
[ -n "$run_id" ] && "$rara" --json status "$run_id" | python3 scripts/demo-summary.py
# Each artifact is an S3 object: download the first one and verify its digest.
first=$("$rara" --json status "$run_id" 2>/dev/null | python3 -c '
import json, sys
run = json.load(sys.stdin)
found = [(s["name"], a["name"]) for s in run["steps"] for a in s["artifacts"]]
print(" ".join(found[0]) if found else "")' || true)
if [ -n "$first" ]; then
  mkdir -p .demo/downloads
  read -r first_step first_name <<<"$first"
  "$rara" artifact get "$run_id" "$first_step" "$first_name" -o ".demo/downloads/$first_name"
fi
echo
if [ "$status" -eq 0 ]; then
  echo "demo run succeeded in $(( $(date +%s) - started )) s; logs in .demo/"
else
  echo "demo run did not succeed (exit $status); see .demo/dev.log and .demo/python.log" >&2
fi
exit "$status"
