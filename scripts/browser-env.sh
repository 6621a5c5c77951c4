#!/usr/bin/env bash
# Debian's Chromium and its WebDriver, and axe-core from npm, for the console's browser test
# (cli/tests/console.rs): installed once, skipped when present. Prints nothing on the cached path.
set -euo pipefail
# axe-core, the accessibility check the test injects into each page (cached).
axe=${HOME}/.cache/rara/axe
if [ ! -f "$axe/node_modules/axe-core/axe.min.js" ]; then
    mkdir -p "$axe"
    npm install --prefix "$axe" --no-audit --no-fund --silent axe-core@4.10.2 >/dev/null
fi
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
    exit 0
fi
echo "== installing chromium and chromium-driver (once)"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q chromium chromium-driver >/dev/null || {
    $SUDO apt-get update -q >/dev/null
    $SUDO apt-get install -y -q chromium chromium-driver >/dev/null
}
command -v chromium >/dev/null && command -v chromedriver >/dev/null
