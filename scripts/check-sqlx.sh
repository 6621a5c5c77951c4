#!/usr/bin/env bash
# The committed offline query metadata (.sqlx/) matches the store's statements and the
# migrated schema: `cargo sqlx prepare --workspace --check` against a scratch database
# migrated from migrations/. With --write it regenerates .sqlx/ instead (`make sqlx-prepare`).
# sqlx-cli is installed once into a cached location (about 2 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=--check
case "${1:-}" in
  --write) mode="" ;;
  "") ;;
  *) echo "usage: $0 [--write]" >&2; exit 2 ;;
esac

# The sqlx-cli release that matches the workspace's sqlx (Cargo.lock).
version=0.8.6
root=${SQLX_CLI_ROOT:-$HOME/.cache/rara/tools}
if ! "$root/bin/cargo-sqlx" sqlx --version 2>/dev/null | grep -q "$version"; then
  echo "installing sqlx-cli $version into $root"
  cargo install sqlx-cli --version "=$version" --locked --no-default-features --features rustls,postgres \
    --root "$root" --quiet
fi
export PATH="$root/bin:$PATH"

base=${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
scripts/ensure-postgres.sh >/dev/null
export DATABASE_URL="${base%/*}/rara_sqlx_$$"
trap 'sqlx database drop -y >/dev/null 2>&1 || true' EXIT
sqlx database create
sqlx migrate run --source migrations >/dev/null

# The macros read the database, not .sqlx/, while they are being prepared.
unset SQLX_OFFLINE
cargo sqlx prepare --workspace $mode
