#!/usr/bin/env bash
# Build the book (docs/, mdBook) and check the documentation's links (scripts/check-links.py).
# Run by `make lint`. mdBook is installed once, pinned, into ~/.cache/rara/tools (about 90 s
# on two cores), and reused after that.
set -euo pipefail

cd "$(dirname "$0")/.."

MDBOOK_VERSION=0.4.52
MDBOOK_ROOT="${RARA_TOOLS_DIR:-$HOME/.cache/rara/tools}/mdbook-$MDBOOK_VERSION"
MDBOOK="$MDBOOK_ROOT/bin/mdbook"

if [[ ! -x "$MDBOOK" ]]; then
  echo "check-docs: installing mdbook $MDBOOK_VERSION into $MDBOOK_ROOT (once)" >&2
  cargo install mdbook --locked --version "$MDBOOK_VERSION" \
    --no-default-features --features search --root "$MDBOOK_ROOT" --quiet
fi

# The book goes under the workspace's target directory (docs/book.toml: build-dir).
"$MDBOOK" build docs 2>&1 | { grep -v '\[INFO\]' || true; }
test -f target/book/index.html

python3 scripts/check-links.py
