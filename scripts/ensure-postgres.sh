#!/usr/bin/env bash
# Makes sure a Postgres answers at PGHOST:PGPORT (default 127.0.0.1:5432). Starts the
# machine's cluster when it is installed but stopped; otherwise says how to get one.
set -euo pipefail
host=${PGHOST:-127.0.0.1}
port=${PGPORT:-5432}
if pg_isready -q -h "$host" -p "$port" 2>/dev/null; then
  exit 0
fi
if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
  echo "Postgres is not answering on $host:$port; starting the local cluster..."
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
  for _ in $(seq 1 50); do
    pg_isready -q -h "$host" -p "$port" && exit 0
    sleep 0.2
  done
fi
echo "error: no Postgres answers on $host:$port." >&2
echo "Set DATABASE_URL to a reachable server, or install PostgreSQL (apt-get install postgresql)." >&2
exit 1
