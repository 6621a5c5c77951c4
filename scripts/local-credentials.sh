#!/usr/bin/env bash
# Prints the `export`s of a local credential for `make demo` and `make dev`, so the local
# stack runs with auth on, as deployed: a random bearer token (the Python executor accepts it,
# rara sends it), a random key for the attempts' secrets, and, when the `openssl` command is
# there, a private CA and a certificate for 127.0.0.1/localhost signed by it (TLS; rara trusts
# only that CA). Made once per DIR (mode 700, files 600) and reused.
# Usage: eval "$(scripts/local-credentials.sh DIR)"; then serve https:// when RARA_LOCAL_TLS_CERT is set.
# Nothing here is a production credential: deployments take theirs from their secret store.
set -euo pipefail
dir=${1:?usage: scripts/local-credentials.sh DIR}
umask 077
mkdir -p "$dir"
dir=$(cd "$dir" && pwd) # absolute: the exports work from any directory
random() { python3 -c 'import secrets; print(secrets.token_urlsafe(32))'; }
[ -s "$dir/token" ] || random >"$dir/token"
[ -s "$dir/attempt-key" ] || random >"$dir/attempt-key"

if command -v openssl >/dev/null && [ ! -s "$dir/server.pem" ]; then
  (
    cd "$dir"
    openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -out ca.key
    openssl req -x509 -new -key ca.key -sha256 -days 30 -subj "/CN=rara local CA" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" -out ca.pem 2>/dev/null
    openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -out server.key
    openssl req -new -key server.key -subj "/CN=localhost" -out server.csr 2>/dev/null
    printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 -sha256 \
      -extfile server.ext -out server.pem 2>/dev/null
    rm -f server.csr server.ext ca.srl ca.key # the CA signs nothing else
  )
fi

echo "export RARA_EXECUTOR_TOKENS=$(cat "$dir/token")"
echo "export RARA_REMOTE_TOKEN=$(cat "$dir/token")"
echo "export RARA_REMOTE_ATTEMPT_KEY=$(cat "$dir/attempt-key")"
if [ -s "$dir/server.pem" ]; then
  echo "export RARA_REMOTE_CA_FILE=$dir/ca.pem RARA_LOCAL_TLS_CERT=$dir/server.pem RARA_LOCAL_TLS_KEY=$dir/server.key"
else
  echo "echo 'local-credentials: no openssl command: the local executor serves plaintext (token still required)' >&2"
  echo "unset RARA_REMOTE_CA_FILE RARA_LOCAL_TLS_CERT RARA_LOCAL_TLS_KEY"
fi
