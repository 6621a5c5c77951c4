"""Deploy the non-Lambda part of infra/template.yaml into LocalStack and check that the
real queues have exactly the settings the functions would be given.

LocalStack runs without Docker here, so Lambda functions cannot run (they end in state
Failed) and the SAM transform's function resources are left out: this deploys the step
queue, its DLQ, the log groups and the two IAM roles through CloudFormation, with the
parameter values of samconfig.toml's environments, then reads the queues back over the
SQS API and the roles' policies over the IAM API and compares them with the RARA_*
variables the template hands to the functions (evaluated by template_checks.py).

Then the part of infra/executor-service.yaml LocalStack can run (localstack_executor_service.py:
the token secret, the log group, the two roles; no ECS, ELBv2 or ECR in its community edition).

Run through scripts/deploy-localstack.sh (starts LocalStack when needed). Needs the
AWS_* variables of `scripts/localstack.sh env` and boto3 (in .venv-tools with aws-sam-cli).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import boto3

import localstack_executor_service
import template_checks as tc

KEEP_TYPES = {
    "AWS::SQS::Queue",
    "AWS::SQS::QueuePolicy",
    "AWS::Logs::LogGroup",
    "AWS::IAM::Role",
    "AWS::IAM::ManagedPolicy",
    # The artifact bucket (and its TLS-only policy): the roles grant on it.
    "AWS::S3::Bucket",
    "AWS::S3::BucketPolicy",
}


def _references(node: Any) -> set[str]:
    out: set[str] = set()
    if isinstance(node, dict):
        if len(node) == 1 and "Ref" in node:
            out.add(node["Ref"])
        elif len(node) == 1 and "Fn::GetAtt" in node:
            arg = node["Fn::GetAtt"]
            out.add(arg.split(".")[0] if isinstance(arg, str) else arg[0])
        elif len(node) == 1 and "Fn::Sub" in node:
            import re

            text = node["Fn::Sub"] if isinstance(node["Fn::Sub"], str) else node["Fn::Sub"][0]
            out |= {m.split(".")[0] for m in re.findall(r"\$\{([^}!]+)\}", text)}
        for v in node.values():
            out |= _references(v)
    elif isinstance(node, list):
        for v in node:
            out |= _references(v)
    return out


def infrastructure_template(template: dict) -> dict:
    """The template without the SAM transform and without what needs Lambda."""
    resources = {k: v for k, v in template["Resources"].items() if v["Type"] in KEEP_TYPES and "Condition" not in v}
    outputs = {
        k: v
        for k, v in template.get("Outputs", {}).items()
        if "Condition" not in v
        and not ({r for r in _references(v) if r in template["Resources"]} - set(resources))
    }
    return {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "rara infrastructure check (queues, log groups, roles) for LocalStack",
        "Parameters": template["Parameters"],
        "Mappings": template["Mappings"],
        "Conditions": template["Conditions"],
        "Resources": resources,
        "Outputs": outputs,
    }


def deploy_and_check(name: str, params: dict[str, str], template: dict, keep: bool) -> list[str]:
    cfn, sqs, iam = boto3.client("cloudformation"), boto3.client("sqs"), boto3.client("iam")
    params = {**tc.REQUIRED_PARAMS, **params}
    body = json.dumps(infrastructure_template(template))
    stack = f"rara-infra-check-{name}-{int(time.time())}"
    print(f"== {name}: deploying {stack} with {params}")
    start = time.time()
    cfn.create_stack(
        StackName=stack,
        TemplateBody=body,
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in params.items()],
        Capabilities=["CAPABILITY_IAM"],
    )
    problems: list[str] = []
    try:
        cfn.get_waiter("stack_create_complete").wait(StackName=stack, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
        print(f"   created in {time.time() - start:.1f} s")
        described = cfn.describe_stacks(StackName=stack)["Stacks"][0]
        outputs = {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}
        physical = {
            r["LogicalResourceId"]: r["PhysicalResourceId"]
            for r in cfn.describe_stack_resources(StackName=stack)["StackResources"]
        }
        queue_url, dlq_url = outputs["QueueUrl"], outputs["DeadLetterQueueUrl"]
        q = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
        d = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["All"])["Attributes"]
        redrive = json.loads(q["RedrivePolicy"])

        # What the functions would be given, with the real URLs in place of the Refs.
        resolved = tc.resolve(template, params, name)
        real = {
            tc.Sym("Ref", tc.QUEUE): queue_url,
            tc.Sym("Ref", tc.DLQ): dlq_url,
        }
        env = {
            k: real.get(v, v) if isinstance(v, tc.Sym) else str(v)
            for k, v in resolved.props(tc.EXECUTOR)["Environment"]["Variables"].items()
        }
        print("   the functions' settings:", json.dumps({k: env[k] for k in tc.REQUIRED_ENV}, indent=None))
        checks = {
            "VisibilityTimeout": (q["VisibilityTimeout"], env["RARA_VISIBILITY_TIMEOUT_SECONDS"]),
            "maxReceiveCount": (str(redrive["maxReceiveCount"]), env["RARA_MAX_RECEIVE_COUNT"]),
            "deadLetterTargetArn": (redrive["deadLetterTargetArn"], d["QueueArn"]),
            "QueueUrl": (queue_url, env["RARA_QUEUE_URL"]),
            "DlqUrl": (dlq_url, env["RARA_DLQ_URL"]),
            "SqsManagedSseEnabled": (q.get("SqsManagedSseEnabled", "true"), "true"),
        }
        for what, (have, want) in checks.items():
            status = "ok" if have == want else "MISMATCH"
            print(f"   {what:22} queue={have!s:60} functions={want} {status}")
            if have != want:
                problems.append(f"{name}: {what}: the queue has {have}, the functions get {want}")
        if int(redrive["maxReceiveCount"]) < int(env["RARA_MAX_ATTEMPTS_LIMIT"]) + tc.RECEIVE_COUNT_MARGIN:
            problems.append(f"{name}: maxReceiveCount below the attempts limit + margin")
        if int(q["VisibilityTimeout"]) < tc.VISIBILITY_FACTOR * int(env["RARA_FUNCTION_TIMEOUT_SECONDS"]):
            problems.append(f"{name}: visibility below 6 x the executor timeout")

        # Both queues carry the TLS-only policy as SQS stores it.
        for label, url, attrs in (("StepQueue", queue_url, q), ("DeadLetterQueue", dlq_url, d)):
            policy = json.loads(attrs.get("Policy", "{}"))
            tls_only = any(
                st.get("Effect") == "Deny"
                and str(st.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport")).lower() == "false"
                and attrs["QueueArn"] in tc._as_list(st.get("Resource"))
                for st in tc._as_list(policy.get("Statement", []))
            )
            print(f"   {label:22} policy denies aws:SecureTransport false {'ok' if tls_only else 'MISSING'}")
            if not tls_only:
                problems.append(f"{name}: {label} has no TLS-only queue policy")

        # The roles as IAM stores them: SQS grants on exactly these two queues.
        arns = {q["QueueArn"]: tc.QUEUE, d["QueueArn"]: tc.DLQ}
        for role_id, want in tc.SQS_GRANTS.items():
            have = set()
            for doc in _policy_documents(iam, physical[role_id]):
                for st in tc._as_list(doc["Statement"]):
                    for action in tc._as_list(st["Action"]):
                        if not action.startswith("sqs:"):
                            continue
                        for res in tc._as_list(st["Resource"]):
                            have.add((arns.get(res, res), action))
            status = "ok" if have == want else "MISMATCH"
            print(f"   {role_id:22} SQS grants {sorted(a for _, a in have)} on {sorted({r for r, _ in have})} {status}")
            if have != want:
                problems.append(f"{name}: {role_id} grants {sorted(have)}, want {sorted(want)}")
    finally:
        if keep:
            print(f"   kept stack {stack}")
        else:
            cfn.delete_stack(StackName=stack)
            cfn.get_waiter("stack_delete_complete").wait(StackName=stack, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
            _delete_retained(stack)
    return problems


def _policy_documents(iam: Any, physical: str) -> list[dict]:
    """The policy documents of a role's inline policies, or of a managed policy (its
    physical id is its ARN: the operator policy), as IAM stores them."""
    if physical.startswith("arn:") and ":policy/" in physical:
        version = iam.get_policy(PolicyArn=physical)["Policy"]["DefaultVersionId"]
        docs = [iam.get_policy_version(PolicyArn=physical, VersionId=version)["PolicyVersion"]["Document"]]
    else:
        names = iam.list_role_policies(RoleName=physical)["PolicyNames"]
        docs = [iam.get_role_policy(RoleName=physical, PolicyName=n)["PolicyDocument"] for n in names]
    return [json.loads(d) if isinstance(d, str) else d for d in docs]


def _delete_retained(stack: str) -> None:
    """What DeletionPolicy Retain leaves behind (the DLQ, the log groups), where LocalStack
    keeps it: this check's own leftovers. LocalStack 4.13.1 deletes them with the stack."""
    sqs, logs = boto3.client("sqs"), boto3.client("logs")
    for url in sqs.list_queues(QueueNamePrefix=stack).get("QueueUrls", []):
        sqs.delete_queue(QueueUrl=url)
    for group in logs.describe_log_groups(logGroupNamePrefix=f"/rara/{stack}/")["logGroups"]:
        logs.delete_log_group(logGroupName=group["logGroupName"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", action="append", help="samconfig environment(s) (default: all)")
    parser.add_argument("--all-profiles", action="store_true", help="also every TimingProfile x MaxAttemptsLimit")
    parser.add_argument("--keep", action="store_true", help="keep the stacks")
    parser.add_argument(
        "--no-executor-service", action="store_true", help="skip infra/executor-service.yaml's deployable part"
    )
    args = parser.parse_args()

    template = tc.load_template()
    runs = {f"samconfig-{env}": p for env, p in tc.samconfig_overrides().items() if not args.env or env in args.env}
    if args.all_profiles:
        declared = template["Parameters"]
        for t in declared["TimingProfile"]["AllowedValues"]:
            for a in declared["MaxAttemptsLimit"]["AllowedValues"]:
                runs[f"{t}-{a}"] = {"TimingProfile": t, "MaxAttemptsLimit": a}
    problems: list[str] = []
    for name, params in runs.items():
        problems += deploy_and_check(name, params, template, args.keep)
    if not args.no_executor_service:
        problems += localstack_executor_service.deploy_and_check(args.keep)
    for p in problems:
        print("PROBLEM:", p)
    stacks = len(runs) + (0 if args.no_executor_service else 1)
    print(f"{stacks} stack(s) deployed and checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
