#!/usr/bin/env bash
# Check the deployment: `sam validate --lint` and `cfn-lint` on both stacks (the main
# template and the remote executor service), then the property tests of infra/tests (the
# relations linters miss: partial batch responses, visibility vs timeouts, maxReceiveCount
# vs attempts, heartbeat vs lease, env vars vs queue, IAM scoped to the exact queues and
# secret, no plain secrets, alarms, retained data, TLS-only queues, documented parameters;
# for the executor service: HTTPS listener, gRPC health check, security groups, injected
# secret, logs, autoscaling, the execution role against the ECS agent's calls, and the
# Dockerfile's build stage played on the host, its entry point started as the task starts
# it). No AWS account or credentials needed; the image step needs PyPI (or pip's cache)
# when the Dockerfile or executors/python changed.
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
TEMPLATES=(infra/template.yaml infra/executor-service.yaml)

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

for template in "${TEMPLATES[@]}"; do
  echo "== sam validate --lint $template"
  sam validate --lint -t "$template"
  echo "== cfn-lint $template"
  cfn-lint "$template" && echo "cfn-lint: no findings"
done
# The executor service stack is held to cfn-lint's informational rules too (explicit
# DeletionPolicy on every stateful resource, ...).
cfn-lint --include-checks I -- infra/executor-service.yaml && echo "cfn-lint (with I rules): no findings"
# The image's build stage, played on the host (no Docker engine: infra/tests/image_recipe.py,
# ~30 s when the Dockerfile or executors/python changed); the image test then starts the
# real rara_worker from it the way the task definition does.
echo "== executor image build stage (without an engine)"
RARA_EXECUTOR_PYTHON="$(cd infra/tests && python image_recipe.py "$VENV/../.venv-image" | tail -n 1)"
export RARA_EXECUTOR_PYTHON
echo "== template property tests"
python -m pytest -q -p no:cacheprovider infra/tests
