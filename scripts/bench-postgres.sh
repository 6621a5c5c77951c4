#!/usr/bin/env bash
# A throw-away Postgres that the benchmark controls (issue 19; BENCHMARKS.md, "Machine"):
# initdb into BENCH_PG_DIR, listen on 127.0.0.1:BENCH_PG_PORT (and a unix socket in the
# directory) with the settings written below, autovacuum on as RDS has it. The machine's
# server on 5432 is never touched.
#
# Usage: scripts/bench-postgres.sh start|stop|status|env
#   start   initdb (unless the directory holds a cluster) and start it; prints the env line
#   stop    stop it and remove the directory
#   env     `export DATABASE_URL=...` for eval: eval "$(scripts/bench-postgres.sh env)"
# Environment: BENCH_PG_DIR (/var/tmp/rara-bench-pg: the same disk as the machine's server, so
#   fsync costs the same; not /tmp), BENCH_PG_PORT (55432), BENCH_PG_BIN
#   (/usr/lib/postgresql/15/bin).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

dir=${BENCH_PG_DIR:-/var/tmp/rara-bench-pg}
port=${BENCH_PG_PORT:-55432}
bin=${BENCH_PG_BIN:-/usr/lib/postgresql/15/bin}
url="postgres://postgres@127.0.0.1:$port/postgres"

# initdb and postgres refuse to run as root: run them as the postgres user then.
as_owner() {
    if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

settings() {
    local preload=""
    [[ -f "$("$bin/pg_config" --pkglibdir)/pg_stat_statements.so" ]] && preload=pg_stat_statements
    cat <<CONF
# Written by scripts/bench-postgres.sh; documented in BENCHMARKS.md ("Machine").
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
max_connections = 200
shared_buffers = 1GB
fsync = on
synchronous_commit = on
full_page_writes = on
wal_level = replica
max_wal_size = 2GB
checkpoint_timeout = 5min
# Autovacuum on, as on RDS (naptime 15 s and vacuum scale factor 0.1 are RDS's defaults).
autovacuum = on
autovacuum_max_workers = 3
autovacuum_naptime = 15s
autovacuum_vacuum_scale_factor = 0.1
autovacuum_analyze_scale_factor = 0.05
track_io_timing = on
shared_preload_libraries = '$preload'
pg_stat_statements.track = top
log_min_messages = warning
CONF
}

case "${1:-}" in
start)
    if [[ ! -f "$dir/data/PG_VERSION" ]]; then
        mkdir -p "$dir"
        [[ $(id -u) == 0 ]] && chown postgres: "$dir"
        as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
        settings | as_owner tee -a "$dir/data/postgresql.conf" >/dev/null
    fi
    if ! "$bin/pg_isready" -q -h 127.0.0.1 -p "$port"; then
        as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w start >/dev/null
    fi
    log "running on 127.0.0.1:$port (data in $dir/data, log $dir/log)"
    echo "export DATABASE_URL=$url"
    ;;
stop)
    if [[ -f "$dir/data/postmaster.pid" ]]; then
        as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    fi
    rm -rf "$dir"
    ;;
status)
    "$bin/pg_isready" -h 127.0.0.1 -p "$port"
    ;;
env)
    echo "export DATABASE_URL=$url"
    ;;
*)
    echo "usage: $0 start|stop|status|env" >&2
    exit 2
    ;;
esac
