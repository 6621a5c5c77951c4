#!/usr/bin/env bash
# rustls only: no OpenSSL (nor native-tls) anywhere in the dependency tree.
set -euo pipefail
cd "$(dirname "$0")/.."
for crate in openssl-sys openssl native-tls; do
  if cargo tree --workspace --all-features -e normal,build,dev -i "$crate" >/dev/null 2>&1; then
    echo "error: $crate is in the dependency tree:" >&2
    cargo tree --workspace --all-features -e normal,build,dev -i "$crate" | head -20 >&2
    exit 1
  fi
done
echo "check-no-openssl: no OpenSSL or native-tls in the dependency tree"
