#!/usr/bin/env bash
# Evaluates the AWS calls recorded during the tests (RARA_AWS_CALL_LOG=<dir>, see
# shared/platform/src/call_log.rs) against the IAM policies infra/template.yaml gives each
# role, with a real IAM policy simulator (tools/iam-check, @cloud-copilot/iam-simulate).
# Prints a table (role, action, resource, calls, decision) and fails on any call that is
# denied, that names no function, or that cannot be evaluated.
#
#   scripts/check-iam.sh install                 # tools/iam-check/node_modules (npm ci, once)
#   scripts/check-iam.sh [--template T] DIR...   # check the calls recorded in DIR
#   scripts/check-iam.sh test                    # the evaluator's own tests (node --test)
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

TOOL=tools/iam-check

install() {
  command -v node >/dev/null || die "node (>= 20) is required"
  local key stamp="$TOOL/node_modules/.rara-stamp"
  key="$(node --version) $(sha256sum "$TOOL/package-lock.json" | cut -d' ' -f1)"
  if ! stamp_matches "$stamp" "$key"; then
    (cd "$TOOL" && npm ci --no-audit --no-fund --silent) || die "npm ci failed in $TOOL"
    stamp_write "$stamp" "$key"
  fi
}

case "${1:-}" in
  install) install ;;
  test) install; (cd "$TOOL" && node --test test/) ;;
  "") die "usage: scripts/check-iam.sh [install | test | [--template T] DIR...]" ;;
  *) install; node "$TOOL/bin/iam-check.mjs" --root "$PWD" "$@" ;;
esac
