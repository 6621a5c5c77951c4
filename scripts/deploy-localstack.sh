#!/usr/bin/env bash
# Deploy the non-Lambda part of infra/template.yaml (step queue, DLQ with its redrive
# policy, log groups, the two scoped IAM roles) into LocalStack through CloudFormation,
# with samconfig.toml's parameter values, and check that the real queues have exactly
# the settings the functions would be given (RARA_VISIBILITY_TIMEOUT_SECONDS,
# RARA_MAX_RECEIVE_COUNT, the URLs) and the roles grant SQS access to exactly them.
# The stacks are deleted afterwards. Lambda itself cannot run in LocalStack without Docker.
# Then the part of infra/executor-service.yaml that LocalStack's community edition can run
# (the token secret, the log group, the execution and task roles: it has no ECS, ELBv2, ECR
# or Application Auto Scaling), checked as stored: the execution role allows every call of
# infra/tests/executor_service_calls.jsonl on its concrete ARN, and the task definition
# with the real ARNs is a valid ecs:RegisterTaskDefinition request.
#
#   scripts/deploy-localstack.sh                  # the samconfig environments + the executor service
#   scripts/deploy-localstack.sh --no-executor-service
#   scripts/deploy-localstack.sh --all-profiles   # and every TimingProfile x MaxAttemptsLimit
#   scripts/deploy-localstack.sh --keep           # keep the stacks
#
# Starts LocalStack (scripts/localstack.sh) when nothing answers, and stops it again.
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

scripts/check-template.sh --install-only
localstack_up

cd infra/tests
../../.venv-tools/bin/python localstack_deploy.py "$@"
