#!/usr/bin/env bash
# Ensure the project-local virtualenv .venv-clients exists with the pinned test tooling and the
# Python client (clients/python) installed from its directory, as `pip install ./clients/python`
# installs it (not editable: the tests use what a user gets). Skips pip when the stamp (the pins
# and the client's files) matches. Prints the venv's python path as its last line.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

VENV=.venv-clients
# Known-good pins (resolved together on Python 3.11). Bump them here, all at once.
PINS=(
  pip==26.3
  setuptools==84.2.1
  httpx==0.28.1
  pytest==9.2.0
  pytest-asyncio==1.5.0
  mypy==2.4.1
  pyyaml==6.0.3
  types-pyyaml==6.0.12.20261113
)
want="$(printf '%s\n' "${PINS[@]}" | cat - <(find clients/python -path '*/build' -prune -o -type f \
  \( -name '*.py' -o -name '*.toml' -o -name 'py.typed' -o -name '*.md' \) -print0 | sort -z | xargs -0 cat) \
  | sha256sum | cut -d' ' -f1)"

STAMP="$VENV/.rara-stamp"
venv_ensure "$VENV"
if stamp_matches "$STAMP" "$want"; then
  log "$VENV is up to date"
else
  log "installing pinned tools and clients/python into $VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PINS[@]}"
  rm -rf clients/python/build
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-build-isolation \
    --force-reinstall --no-deps ./clients/python
  rm -rf clients/python/build clients/python/src/*.egg-info
  stamp_write "$STAMP" "$want"
fi
echo "$PWD/$VENV/bin/python"
