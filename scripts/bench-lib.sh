# shellcheck shell=bash
# What the benchmark scripts share. Source it instead of scripts/lib.sh (it sources that,
# which moves to the repository root):
#
#   bench_scratch_db PREFIX   create the database PREFIX_<random> on the server of DATABASE_URL
#                             (default postgres://postgres@127.0.0.1:5432/postgres), dropped on
#                             exit; sets BENCH_ADMIN_URL (the server's `postgres` database),
#                             BENCH_DB (the name) and BENCH_DB_URL (the URL's query kept)
#   bench_measure OUT [ARG]... scripts/pg-figures.py --out OUT ARG...: the Postgres work of a
#                             command per unit (CPU, WAL bytes, commits, tuples written)
#   bench_load                the 1-minute load average

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bench_scratch_db() {
  local url=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
  local base=${url%%\?*} query="" server
  [[ "$url" == *\?* ]] && query="?${url#*\?}"
  server=${base%/*}
  BENCH_ADMIN_URL="$server/postgres$query"
  BENCH_DB="$1_$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
  BENCH_DB_URL="$server/$BENCH_DB$query"
  psql -q "$BENCH_ADMIN_URL" -c "CREATE DATABASE $BENCH_DB" >/dev/null
  on_exit _bench_drop_db "$BENCH_ADMIN_URL" "$BENCH_DB"
}
_bench_drop_db() { psql -q "$1" -c "DROP DATABASE IF EXISTS $2 WITH (FORCE)" >/dev/null 2>&1 || true; }

bench_measure() {
  local out=$1
  shift
  python3 scripts/pg-figures.py --out "$out" "$@"
}

bench_load() { cut -d' ' -f1 /proc/loadavg; }
