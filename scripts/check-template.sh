#!/usr/bin/env bash
# Check the deployment: `sam validate --lint`, `cfn-lint`, then the property tests of
# infra/tests (the relations linters miss: partial batch responses, visibility vs
# timeouts, maxReceiveCount vs attempts, heartbeat vs lease, env vars vs queue, IAM
# scoped to the exact queues and secret, no plain secrets, alarms). Offline: no AWS
# account or credentials needed.
#
#   scripts/check-template.sh                 # install the tools if missing, run every check
#   scripts/check-template.sh --install-only  # only make sure sam / cfn-lint / pytest are there
#
# Tools go into the project-local virtualenv .venv-tools (cached by a stamp, ~1 min cold).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

VENV="$PWD/.venv-tools"
# Known-good pins, resolved together on Python 3.11.
PINS=(aws-sam-cli==1.170.0 cfn-lint==1.58.0 pytest==9.2.0)
TEMPLATE=infra/template.yaml

venv_pip "$VENV" "${PINS[*]}" "${PINS[@]}"  # about a minute, once
if [[ "${1:-}" == "--install-only" ]]; then
  exit 0
elif [[ $# -gt 0 ]]; then
  echo "usage: $0 [--install-only]" >&2
  exit 2
fi

export PATH="$VENV/bin:$PATH"
# sam validate and the SAM translator want a region; nothing is called on AWS.
export SAM_CLI_TELEMETRY=0 AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"

echo "== sam validate --lint"
sam validate --lint -t "$TEMPLATE"
echo "== cfn-lint"
cfn-lint "$TEMPLATE" && echo "cfn-lint: no findings"
echo "== template property tests"
python -m pytest -q -p no:cacheprovider infra/tests
