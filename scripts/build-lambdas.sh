#!/usr/bin/env bash
# Build the two Lambda bootstraps (arm64, provided.al2023) with cargo-lambda and zig:
#   target/lambda/scheduler/bootstrap   target/lambda/executor/bootstrap
# (under $CARGO_TARGET_DIR when that is set).
#
#   scripts/build-lambdas.sh                 # install the tools if missing, release build
#   scripts/build-lambdas.sh --install-only  # only make sure the tools are there (for `sam build`)
#
# Tools go into the project-local virtualenv .venv-tools (cached by a stamp) and the
# rustup target aarch64-unknown-linux-gnu. A cold release build takes ~7-10 min on 2 cores
# (`cargo lambda build --release --arm64 --bin <name>` in functions/<name>, as `sam build`).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"
ROOT="$PWD"

VENV="$ROOT/.venv-tools"
# Known-good pins (cargo-lambda ships a static binary; ziglang ships zig, which
# cargo-lambda finds through `python3 -m ziglang` when the venv is first on PATH).
PINS=(cargo-lambda==1.9.2 ziglang==0.17.1)
TARGET=aarch64-unknown-linux-gnu
BINS=(scheduler executor)

install_tools() {
  venv_pip "$VENV" "${PINS[*]}" "${PINS[@]}"
  if ! rustup target list --installed | grep -qx "$TARGET"; then
    log "rustup target add $TARGET"
    rustup target add "$TARGET"
  fi
}

install_tools
if [[ "${1:-}" == "--install-only" ]]; then
  exit 0
elif [[ $# -gt 0 ]]; then
  echo "usage: $0 [--install-only]" >&2
  exit 2
fi

export PATH="$VENV/bin:$PATH"
target_dir="$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"

start=$SECONDS
# One build per function, from its crate, exactly as `sam build` (rust-cargolambda) runs
# it: the same cargo invocation means the same resolved features, so `make deploy` after
# this reuses every artifact instead of recompiling for a different feature set.
for b in "${BINS[@]}"; do
  log "(cd functions/$b && cargo lambda build --release --arm64 --bin $b)"
  (cd "functions/$b" && cargo lambda build --release --arm64 --bin "$b")
done
elapsed=$((SECONDS - start))

status=0
for b in "${BINS[@]}"; do
  path="$target_dir/lambda/$b/bootstrap"
  if [[ -f "$path" ]]; then
    size=$(stat -c %s "$path")
    printf '%-10s %s  %s bytes (%s MiB)\n' "$b" "${path#"$ROOT"/}" "$size" \
      "$(awk -v s="$size" 'BEGIN { printf "%.1f", s / 1048576 }')"
  else
    echo "$b: missing $path" >&2
    status=1
  fi
done
log "built in ${elapsed} s"
exit $status
