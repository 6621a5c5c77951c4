#!/usr/bin/env bash
# Ensure the project-local virtualenv .venv-executor exists, with the pinned Python
# tooling and the rara_worker package (editable) installed. Skips pip when the stamp
# matches. Prints the venv's python path as its last line.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

VENV=.venv-executor
# Known-good pins (resolved together on Python 3.11). Bump them here, all at once.
PINS=(
  pip==26.3
  setuptools==84.2.1
  grpcio==1.85.3
  grpcio-tools==1.85.1
  grpcio-health-checking==1.85.1
  protobuf==7.36.2
  opentelemetry-sdk==1.45.2
  opentelemetry-exporter-otlp-proto-grpc==1.45.2
  opentelemetry-exporter-otlp-proto-http==1.45.2
  semver==3.1.1
  boto3==1.44.5
  pytest==9.2.0
  pytest-asyncio==1.5.0
  mypy==2.4.1
  types-protobuf==7.35.1.20260906
  types-grpcio==1.85.0.20261028
)
want="$(printf '%s\n' "${PINS[@]}" | cat - executors/python/pyproject.toml | sha256sum | cut -d' ' -f1)"

STAMP="$VENV/.rara-stamp"
venv_ensure "$VENV"
if stamp_matches "$STAMP" "$want"; then
  log "$VENV is up to date"
else
  log "installing pinned tools and executors/python (editable) into $VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PINS[@]}"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    --no-build-isolation --no-deps -e executors/python
  stamp_write "$STAMP" "$want"
fi
echo "$PWD/$VENV/bin/python"
