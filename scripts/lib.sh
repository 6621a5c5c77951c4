# shellcheck shell=bash
# The idioms scripts/*.sh share. Source it first; it moves to the repository root:
#
#   source "$(dirname "$0")/lib.sh"
#
#   log MSG / die MSG          "<script>: MSG" on stderr (die exits 1)
#   on_exit CMD [ARG]...       run CMD when the script ends (exit, error, Ctrl-C, TERM);
#                              handlers run in reverse order of registration
#   start_bg CMD [ARG]...      run CMD in the background (redirect the call as you would the
#                              command); its pid is in $BG_PID; stopped on exit (TERM, then
#                              KILL after 5 s)
#   localstack_up              start LocalStack unless something answers already, stop it on
#                              exit only if it was started here, and export the AWS_* variables
#   stamp_matches FILE KEY     0 when FILE holds exactly KEY (an install is up to date)
#   stamp_write FILE KEY       record KEY in FILE after an install succeeded
#   venv_ensure VENV           create the virtualenv VENV (with $PYTHON, default python3) if
#                              it has no python
#   venv_pip VENV KEY ARG...   venv_ensure, then `pip install ARG...` into it unless the
#                              script's stamp in VENV already holds KEY (stamped on success)
#   target_dir                 the absolute path of cargo's target directory (honours
#                              CARGO_TARGET_DIR)
#   rara_bin                   the absolute path of the debug `rara` binary (honours
#                              CARGO_TARGET_DIR)
#
# Sourcing it defines these, sets the EXIT, INT and TERM traps that on_exit needs (a script
# that sources it registers cleanups with on_exit, not with its own trap) and moves to the
# repository root; it starts nothing.

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

_LIB_NAME="$(basename "$0" .sh)"
log() { echo "$_LIB_NAME: $*" >&2; }
die() { echo "$_LIB_NAME: error: $*" >&2; exit 1; }

_LIB_ON_EXIT=()
_lib_run_exit_handlers() {
  local status=$? i
  trap - EXIT
  for ((i = ${#_LIB_ON_EXIT[@]} - 1; i >= 0; i--)); do
    eval "${_LIB_ON_EXIT[i]}" || true
  done
  exit "$status"
}
trap _lib_run_exit_handlers EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

on_exit() {
  local quoted
  printf -v quoted '%q ' "$@"
  _LIB_ON_EXIT+=("$quoted")
}

# Stops one background process: TERM, up to 5 s to exit, then KILL.
_lib_stop_pid() {
  local pid=$1 _
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

BG_PID=""
start_bg() {
  "$@" &
  BG_PID=$!
  on_exit _lib_stop_pid "$BG_PID"
}

localstack_up() {
  if ! scripts/localstack.sh status >/dev/null 2>&1; then
    scripts/localstack.sh start >&2
    on_exit _lib_localstack_stop
  fi
  eval "$(scripts/localstack.sh env)"
}
_lib_localstack_stop() { scripts/localstack.sh stop >/dev/null 2>&1 || true; }

stamp_matches() { [[ -f "$1" && "$(cat "$1")" == "$2" ]]; }
stamp_write() { printf '%s\n' "$2" >"$1"; }

venv_ensure() {
  if [[ ! -x "$1/bin/python" ]]; then
    log "creating $1"
    rm -rf "$1"
    "${PYTHON:-python3}" -m venv "$1"
  fi
}

venv_pip() {
  local venv=$1 key=$2
  shift 2
  venv_ensure "$venv"
  local stamp="$venv/.rara-stamp-$_LIB_NAME"
  if stamp_matches "$stamp" "$key"; then
    return 0
  fi
  log "installing into $venv: $*"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
  stamp_write "$stamp" "$key"
}

target_dir() {
  local dir=${CARGO_TARGET_DIR:-target}
  [[ "$dir" == /* ]] || dir="$PWD/$dir"
  echo "$dir"
}

rara_bin() { echo "$(target_dir)/debug/rara"; }
