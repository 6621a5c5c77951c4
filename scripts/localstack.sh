#!/usr/bin/env bash
# Run LocalStack (a real SQS / CloudFormation / EventBridge / S3 API) as a plain host
# process, without Docker. See /work/shared/TOOLING.md, "A real SQS API".
#
#   scripts/localstack.sh install   # venv .venv-localstack (once, ~1 min)
#   scripts/localstack.sh start     # install if needed, start in the background, wait for health
#   scripts/localstack.sh stop      # stop the process started by `start`
#   scripts/localstack.sh status    # "running" (exit 0) or "not running" (exit 1)
#   eval "$(scripts/localstack.sh env)"   # AWS_* variables for boto3, the aws CLI, the Rust SDK
#
# Environment:
#   LOCALSTACK_PORT      gateway port (default 4566)
#   LOCALSTACK_SERVICES  override the SERVICES list passed to LocalStack
#   LOCALSTACK_WAIT      seconds to wait for health on start (default 90)
#
# `lambda` is in SERVICES only for its control-plane API: without Docker, functions end
# in state Failed and cannot be invoked. Invoke handlers through `cargo lambda` or
# in-process instead.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"
ROOT="$PWD"

PORT="${LOCALSTACK_PORT:-4566}"
VENV="$ROOT/.venv-localstack"
DATA="$ROOT/.localstack-data"
LOG="$DATA/localstack.log"
PIDFILE="$DATA/localstack.pid"
PORTFILE="$DATA/localstack.port"
HEALTH_URL="http://localhost:$PORT/_localstack/health"
WAIT_SECS="${LOCALSTACK_WAIT:-90}"
SERVICES_DEFAULT="sqs,cloudformation,events,s3,iam,sts,ssm,secretsmanager,logs,lambda"
SERVICES="${LOCALSTACK_SERVICES:-$SERVICES_DEFAULT}"

# Python 3.11 needs LocalStack 4.13.1 and these pins (newer releases need Python 3.12).
REQUIREMENTS=("localstack-core[runtime]==4.13.1" "cbor2<6" "pyopenssl<26" "cryptography<47" "service_identity")
REQ_LINE="${REQUIREMENTS[*]}"
STAMP="$VENV/.rara-localstack-installed"

is_installed() {
    [[ -x "$VENV/bin/python" ]] && stamp_matches "$STAMP" "$REQ_LINE"
}

cmd_install() {
    if is_installed; then
        return 0
    fi
    command -v "${PYTHON:-python3}" >/dev/null || die "${PYTHON:-python3} not found"
    log "installing LocalStack runtime into .venv-localstack (about a minute, once)..."
    local start=$SECONDS
    venv_ensure "$VENV"
    local ilog="$VENV/install.log"
    if ! "$VENV/bin/python" -m pip install --disable-pip-version-check "${REQUIREMENTS[@]}" >"$ilog" 2>&1; then
        tail -n 30 "$ilog" >&2
        die "pip install failed (full log: $ilog)"
    fi
    stamp_write "$STAMP" "$REQ_LINE"
    log "installed $("$VENV/bin/python" -c 'import importlib.metadata as m; print("localstack-core", m.version("localstack-core"))') in $((SECONDS - start)) s"
}

# 0 when something on $PORT answers the health endpoint with sqs available or running.
healthy() {
    local body
    body="$(curl -sf --max-time 2 "$HEALTH_URL" 2>/dev/null)" || return 1
    grep -Eq '"sqs": *"(available|running)"' <<<"$body"
}

# Pid from the pid file if that process is alive and is a LocalStack runtime.
managed_pid() {
    [[ -f "$PIDFILE" ]] || return 1
    local pid
    pid="$(cat "$PIDFILE" 2>/dev/null)"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'localstack.runtime' || return 1
    echo "$pid"
}

# 0 when something accepts TCP connections on 127.0.0.1:$PORT.
port_busy() {
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null
}

# TERM the process group of $1, KILL it after 10 s.
terminate() {
    local pid="$1" i
    # The process is its own process-group leader (setsid): signal the group.
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.2
    done
    log "pid $pid still alive after TERM, sending KILL"
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    sleep 0.5
}

show_log_tail() {
    if [[ -f "$LOG" ]]; then
        echo "---- last lines of $LOG ----" >&2
        tail -n 40 "$LOG" >&2
        echo "----" >&2
    fi
}

cmd_start() {
    if healthy; then
        local pid
        if pid="$(managed_pid)"; then
            log "already running on port $PORT (pid $pid), reusing it"
        else
            log "something already answers $HEALTH_URL with sqs available, reusing it (not managed by this script)"
        fi
        return 0
    fi
    cmd_install
    mkdir -p "$DATA"

    local pid
    if pid="$(managed_pid)"; then
        local other
        other="$(cat "$PORTFILE" 2>/dev/null || echo unknown)"
        if [[ "$other" != "$PORT" ]]; then
            die "a LocalStack started by this script (pid $pid) runs on port $other; run '$0 stop' first"
        fi
        log "pid $pid is starting already, waiting for it"
    else
        rm -f "$PIDFILE" "$PORTFILE"
        if port_busy; then
            die "port $PORT is in use by something that is not a healthy LocalStack (set LOCALSTACK_PORT to use another port)"
        fi
        log "starting LocalStack on 127.0.0.1:$PORT (SERVICES=$SERVICES, log: ${LOG#"$ROOT"/})"
        # setsid: own session and process group, so it survives the calling shell and
        # `stop` can signal the whole group. The inner shell writes its own pid, then
        # exec keeps that pid for the Python process.
        PIDFILE="$PIDFILE" setsid nohup env \
            GATEWAY_LISTEN="127.0.0.1:$PORT" \
            LOCALSTACK_HOST="localhost:$PORT" \
            SQS_ENDPOINT_STRATEGY=path \
            DNS_ADDRESS=0 \
            SKIP_SSL_CERT_DOWNLOAD=1 \
            DISABLE_EVENTS=1 \
            FILESYSTEM_ROOT="$DATA" \
            SERVICES="$SERVICES" \
            bash -c 'echo $$ >"$PIDFILE"; exec "$0" -m localstack.runtime.main' "$VENV/bin/python" \
            >"$LOG" 2>&1 </dev/null &
        disown 2>/dev/null || true
        # wait for the pid file (written immediately by the inner shell)
        local i
        for i in $(seq 1 50); do
            [[ -s "$PIDFILE" ]] && break
            sleep 0.1
        done
        pid="$(cat "$PIDFILE" 2>/dev/null || true)"
        [[ -n "$pid" ]] || { show_log_tail; die "LocalStack did not start (no pid file)"; }
        echo "$PORT" >"$PORTFILE"
    fi

    local start=$SECONDS
    while ! healthy; do
        if ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$PIDFILE" "$PORTFILE"
            show_log_tail
            die "LocalStack (pid $pid) exited before becoming healthy"
        fi
        # It does not exit when the gateway cannot bind: it logs this and hangs.
        local why=""
        if grep -q 'CannotListenError\|Address already in use' "$LOG" 2>/dev/null; then
            why="it could not listen on port $PORT"
        elif ((SECONDS - start >= WAIT_SECS)); then
            why="not healthy after ${WAIT_SECS} s"
        fi
        if [[ -n "$why" ]]; then
            show_log_tail
            terminate "$pid"
            rm -f "$PIDFILE" "$PORTFILE"
            die "LocalStack (pid $pid) failed to start: $why (stopped it; log: $LOG)"
        fi
        sleep 0.2
    done
    log "ready at http://localhost:$PORT (pid $pid, $((SECONDS - start)) s)"
}

cmd_stop() {
    local pid
    if ! pid="$(managed_pid)"; then
        rm -f "$PIDFILE" "$PORTFILE"
        if healthy; then
            log "not started by this script; something else answers on port $PORT, leaving it alone"
        else
            log "not running"
        fi
        return 0
    fi
    log "stopping pid $pid"
    terminate "$pid"
    rm -f "$PIDFILE" "$PORTFILE"
    log "stopped"
}

cmd_status() {
    local pid=""
    pid="$(managed_pid)" || pid=""
    if healthy; then
        if [[ -n "$pid" ]]; then
            echo "running (pid $pid, http://localhost:$PORT)"
        else
            echo "running (http://localhost:$PORT, not managed by this script)"
        fi
        return 0
    fi
    local other
    other="$(cat "$PORTFILE" 2>/dev/null || echo "$PORT")"
    if [[ -n "$pid" && "$other" != "$PORT" ]]; then
        echo "not running on port $PORT (pid $pid, started by this script, uses port $other)"
    elif [[ -n "$pid" ]]; then
        echo "not running (pid $pid exists but is not healthy yet; see $LOG)"
    else
        echo "not running"
    fi
    return 1
}

cmd_env() {
    cat <<EOF
export AWS_ENDPOINT_URL=http://localhost:$PORT
export AWS_ACCESS_KEY_ID=test
export AWS_SECRET_ACCESS_KEY=test
export AWS_REGION=us-east-1
export AWS_DEFAULT_REGION=us-east-1
EOF
}

usage() {
    echo "usage: $0 {install|start|stop|status|env}" >&2
    exit 2
}

case "${1:-}" in
install) if is_installed; then log "already installed in .venv-localstack"; else cmd_install; fi ;;
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
env) cmd_env ;;
*) usage ;;
esac
