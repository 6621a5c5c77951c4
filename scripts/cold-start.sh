#!/usr/bin/env bash
# Cold start of the release Lambda bootstraps on this machine: from process start to
# "ready", the moment the function asks the Lambda runtime API for its first event
# (GET /2018-06-01/runtime/invocation/next), which is after its init phase: settings
# read, Postgres pool connected, SQS client and registry built. A small stand-in for the
# runtime API (Python, stdlib only) records that moment; the process is then stopped.
#
#   scripts/cold-start.sh [RUNS]      # default 5 runs per function
#
# Needs Postgres (DATABASE_URL, default the local `rara` database, migrated) and builds
# `scheduler` and `executor` in release for the host (not arm64: see BENCHMARKS.md). No
# SQS call is made during init, so LocalStack is not needed. Not measured: Lambda's own
# sandbox start and the download of the code package. Also prints the resident memory
# (VmRSS) of each process once ready, idle before its first event.
#
# The Postgres connection in the init phase dominates: DATABASE_URL's sslmode decides
# whether a TLS handshake is part of it (the local server has ssl = on, so the default
# `prefer` negotiates TLS, as RDS requires).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"
runs=${1:-5}
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/rara}
scripts/ensure-postgres.sh
cargo build --release --quiet -p rara -p scheduler -p executor
RARA_RELEASE_DIR="$(target_dir)/release"
export RARA_RELEASE_DIR
"$RARA_RELEASE_DIR/rara" migrate >/dev/null

export RARA_QUEUE_URL=http://127.0.0.1:4566/000000000000/rara-cold-start
export RARA_DLQ_URL=http://127.0.0.1:4566/000000000000/rara-cold-start-dlq
export AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
export AWS_LAMBDA_FUNCTION_NAME=cold-start AWS_LAMBDA_FUNCTION_MEMORY_SIZE=512 AWS_LAMBDA_FUNCTION_VERSION=1
export RARA_LOG=warn

python3 - "$runs" <<'PY'
import http.server, os, socket, statistics, subprocess, sys, threading, time

runs = int(sys.argv[1])
release = os.environ["RARA_RELEASE_DIR"]

class Api(http.server.BaseHTTPRequestHandler):
    ready = None
    def do_GET(self):
        if self.path.endswith("/runtime/invocation/next") and Api.ready is not None and not Api.ready.is_set():
            Api.ready.stamp = time.perf_counter()
            Api.ready.set()
        # Never hand out an event: hold the request until the process is stopped.
        time.sleep(30)
    def do_POST(self):
        self.send_response(202)
        self.end_headers()
    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Api)
server.daemon_threads = True
threading.Thread(target=server.serve_forever, daemon=True).start()
api = f"127.0.0.1:{server.server_address[1]}"

for function in ("scheduler", "executor"):
    times, rss = [], []
    for _ in range(runs):
        Api.ready = threading.Event()
        env = dict(os.environ, AWS_LAMBDA_RUNTIME_API=api)
        start = time.perf_counter()
        proc = subprocess.Popen([f"{release}/{function}"], env=env, stderr=subprocess.PIPE)
        ok = Api.ready.wait(20)
        if ok:
            # Resident memory once ready and idle, waiting for its first event.
            time.sleep(0.2)
            with open(f"/proc/{proc.pid}/status") as status:
                rss.append(next(int(l.split()[1]) for l in status if l.startswith("VmRSS:")) / 1024)
        proc.kill()
        _, err = proc.communicate()
        if not ok:
            sys.exit(f"{function} never asked for an event:\n{err.decode(errors='replace')}")
        times.append((Api.ready.stamp - start) * 1000)
    size = os.path.getsize(f"{release}/{function}") / 2**20
    print(f"{function:9} start -> ready: median {statistics.median(times):.1f} ms, "
          f"min {min(times):.1f} ms, max {max(times):.1f} ms over {runs} runs; "
          f"idle RSS {statistics.median(rss):.1f} MiB; binary {size:.1f} MiB")
PY
