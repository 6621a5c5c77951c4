#!/usr/bin/env bash
# Runs both functions under `cargo lambda watch` (the Lambda runtime API emulator) against the
# local stack, and drives real steps through them:
#   scripts/lambda-invoke.sh
#
# 1. Each function once with the committed fixtures (both fixture messages are dead-lettered).
# 2. Scenarios: each workflow is submitted with `rara submit`; the scheduler Lambda is invoked
#    (`cargo lambda invoke scheduler`, as the schedule would) to lease and send; the executor
#    Lambda is fed by scripts/sqs-to-lambda.py, which plays Lambda's SQS event source (batches
#    of up to 10, partial batch responses: what the function lists comes back after its
#    visibility, the rest is deleted). Each run's end is read with `rara --json status`.
#
# Needs cargo-lambda (installed into .venv-tools by scripts/build-lambdas.sh --install-only)
# and boto3 (installed into .venv-tools here, cached by a stamp). Stops everything it started;
# leaves a LocalStack it did not start running. Logs: .lambda-watch.log (the functions),
# .lambda-poller.log and .lambda-poller-journal.log (one line per record: its fate).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

started_ns=$(date +%s%N)
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
seconds() { awk -v ms="$1" 'BEGIN { printf "%.1f s", ms / 1000 }'; }

# A scenario: name | workflow file | expected run status | expected attempts of its steps,
# in definition order | extra check (`same_message`: each step rode on one SQS message from
# its lease to its end; every receive but the last returned it, the last deleted it, and it
# was received at least once per attempt: a retry or a parked attempt came back on it).
SCENARIOS=(
  "short-steps|tests/fixtures/lambda-short-steps.yaml|succeeded|1 1|same_message"
  "retry-same-message|tests/fixtures/lambda-retry-once.yaml|succeeded|2|same_message"
  # A remote Python step longer than one invocation (RARA_FUNCTION_TIMEOUT_SECONDS below):
  # parked at each invocation's end and re-attached through its same message, one attempt.
  "long-remote|tests/fixtures/lambda-long-remote.yaml|succeeded|1|same_message"
)
SCENARIO_TIMEOUT_SECONDS=${SCENARIO_TIMEOUT_SECONDS:-45}
# The schedule: while a scenario runs, the scheduler is invoked again this often (dependents
# and reaped steps are leased by a later pass, as every minute on AWS).
SCHEDULE_EVERY_SECONDS=3
BOTO3=boto3==1.42.34

scripts/build-lambdas.sh --install-only >/dev/null
venv_pip .venv-tools "$BOTO3" "$BOTO3"
export PATH="$PWD/.venv-tools/bin:$PATH"
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/rara_demo}
# One scheduler pass per invocation. A short function timeout: an invocation whose deadline is
# unusable (issue 14: the emulator sends one in 1970) gets 5 s, and a step that hangs ends
# within them; the long remote step outlives several such invocations, parked for 1 s between
# them. The functions and the CLI (`rara submit` checks that in-process steps fit one
# invocation) read the same.
export RARA_SCHEDULER_BUDGET_SECONDS=0
export RARA_FUNCTION_TIMEOUT_SECONDS=${RARA_FUNCTION_TIMEOUT_SECONDS:-5}
export RARA_DEADLINE_MARGIN_MS=1000 RARA_REATTACH_INTERVAL_SECONDS=1
scripts/ensure-postgres.sh
localstack_up
# The functions as `cargo lambda watch` builds them (`cargo run --bin <name>` at the root:
# features unified over the workspace), so that they start at once and a build error shows here.
cargo build --quiet --bin rara --bin scheduler --bin executor
rara="$(rara_bin)"
"$rara" migrate >/dev/null

# A queue pair of this run's own (deleted on exit): runs on one LocalStack never share messages.
queue=rara-lambda-invoke-$$
eval "$("$rara" queue create --name "$queue")"
delete_queues() {
  .venv-tools/bin/python - "$RARA_QUEUE_URL" "$RARA_DLQ_URL" <<'EOF' || true
import sys, boto3
sqs = boto3.client("sqs")
for url in sys.argv[1:]:
    sqs.delete_queue(QueueUrl=url)
EOF
}
on_exit delete_queues

# The Python executor (as scripts/demo.sh starts it), for the remote scenario: the executor
# discovers its capabilities when it starts.
python=$(scripts/python-env.sh | tail -n 1)
mkdir -p .lambda-python
eval "$(scripts/local-credentials.sh .lambda-python/credentials)" # a token: the executor asks for one
start_bg "$python" -m rara_worker --host 127.0.0.1 --port 0 --artifacts-dir .lambda-python/artifacts \
  >.lambda-python/out 2>.lambda-python/log
for _ in $(seq 1 100); do grep -q '^listening on' .lambda-python/out 2>/dev/null && break; sleep 0.1; done
grep -q '^listening on' .lambda-python/out || die "the Python executor did not start; see .lambda-python/log"
export RARA_REMOTE_EXECUTORS="http://$(sed -n 's/^listening on //p' .lambda-python/out | head -n1)"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=${CARGO_LAMBDA_PORT:-$(free_port)}
start_bg cargo lambda watch --ignore-changes --invoke-port "$port" >.lambda-watch.log 2>&1
for _ in $(seq 1 300); do (echo >/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.2; done
invoke_scheduler() {
  cargo lambda invoke scheduler --invoke-port "$port" --data-file tests/fixtures/scheduled-event.json
}

echo "== scheduler <- tests/fixtures/scheduled-event.json"
invoke_scheduler
echo
echo "== executor <- tests/fixtures/sqs-event.json"
out=$(cargo lambda invoke executor --invoke-port "$port" --data-file tests/fixtures/sqs-event.json)
echo "$out"
# Both fixture messages are dead-lettered (one malformed, one unknown step): none comes back.
grep -q '"batchItemFailures":\[\]' <<<"$out" || die "unexpected executor response"

journal=.lambda-poller-journal.log
: >"$journal"
start_bg .venv-tools/bin/python scripts/sqs-to-lambda.py --queue-url "$RARA_QUEUE_URL" --port "$port" \
  --function executor --log "$journal" 2>.lambda-poller.log
poller=$BG_PID

# Prints "<status> <attempts...>" of a run, read with the CLI.
run_state() {
  python3 - "$("$rara" --json status "$1")" <<'EOF'
import json, sys
run = json.loads(sys.argv[1])
print(run["status"], " ".join(str(s["attempt"]) for s in run["steps"]))
EOF
}

# Every step of the run rode on one message: each receive but the last returned it, the last
# deleted it, with receive counts 1, 2, ... and at least one receive per attempt. Prints what
# it found when it did not.
same_message() {
  python3 - "$("$rara" --json status "$1")" "$journal" <<'EOF'
import json, sys
run = json.loads(sys.argv[1])
lines = [json.loads(line) for line in open(sys.argv[2]) if '"step_id"' in line]
ok = True
for step in run["steps"]:
    seen = [line for line in lines if line["step_id"] == step["id"]]
    ids = sorted({line["message_id"] for line in seen})
    fates = [line["fate"] for line in seen]
    counts = [line["receive_count"] for line in seen]
    want = ["returned"] * (len(seen) - 1) + ["deleted"]
    if len(ids) != 1 or fates != want or counts != list(range(1, len(seen) + 1)) or len(seen) < step["attempt"]:
        ok = False
        print(f"step {step['name']}: messages {ids}, fates {fates}, receive counts {counts}")
sys.exit(0 if ok else 1)
EOF
}

summary=()
failures=0
run_scenario() {
  local name=$1 file=$2 want_status=$3 want_attempts=$4 check=$5
  echo
  echo "== scenario $name <- $file"
  local t0 run_id state status attempts found problem=""
  t0=$(date +%s%N)
  run_id=$("$rara" --json submit "$file" | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
  echo "run $run_id"
  local last_tick=$SECONDS
  invoke_scheduler >/dev/null
  while true; do
    state=$(run_state "$run_id")
    [[ "${state%% *}" == running ]] || break
    kill -0 "$poller" 2>/dev/null || { cat .lambda-poller.log >&2; die "the SQS poller exited"; }
    if (($(ms_since "$t0") >= SCENARIO_TIMEOUT_SECONDS * 1000)); then
      problem="still running after ${SCENARIO_TIMEOUT_SECONDS} s"
      break
    fi
    if ((SECONDS - last_tick >= SCHEDULE_EVERY_SECONDS)); then
      invoke_scheduler >/dev/null
      last_tick=$SECONDS
    fi
    sleep 0.25
  done
  local elapsed_ms
  elapsed_ms=$(ms_since "$t0")
  status=${state%% *}
  attempts=${state#* }
  if [[ -z "$problem" && "$status" != "$want_status" ]]; then
    problem="status $status, expected $want_status"
  elif [[ -z "$problem" && "$attempts" != "$want_attempts" ]]; then
    problem="attempts $attempts, expected $want_attempts"
  elif [[ -z "$problem" && "$check" == same_message ]] && ! found=$(same_message "$run_id"); then
    problem="not on one message: $found"
  fi
  if [[ -n "$problem" ]]; then
    failures=$((failures + 1))
    log "scenario $name: $problem (rara status $run_id; logs: .lambda-watch.log, .lambda-poller.log)"
    "$rara" status "$run_id" >&2 || true
  fi
  summary+=("$(printf '%-20s %-10s %-9s %-8s %s' "$name" "$status" "${attempts// /,}" \
    "$(seconds "$elapsed_ms")" "${problem:-ok}")")
}

for scenario in "${SCENARIOS[@]}"; do
  IFS='|' read -r name file want_status want_attempts check <<<"$scenario"
  run_scenario "$name" "$file" "$want_status" "$want_attempts" "$check"
done

# Issue 14: the emulator's deadline (1970) is replaced, and said once per function process.
warnings=$(grep -c 'the invocation deadline is unusable: Lambda-Runtime-Deadline-Ms' .lambda-watch.log || true)
processes=$(grep -c 'starting lambda function instance' .lambda-watch.log || true)
if ((warnings < 1 || warnings > processes)); then
  failures=$((failures + 1))
  log "expected one deadline warning per function process ($processes), found $warnings"
fi

echo
printf '%-20s %-10s %-9s %-8s %s\n' scenario status attempts elapsed check
printf '%s\n' "${summary[@]}"
echo "deadline warnings: $warnings for $processes function processes; total $(seconds "$(ms_since "$started_ns")")"
((failures == 0)) || die "$failures check(s) failed"
echo "lambda-invoke: ok"
