"""Deploy what LocalStack can run of infra/executor-service.yaml and check it as deployed.

LocalStack 4.13.1's community runtime has no ECS, ELBv2, ECR or Application Auto Scaling
(its /_localstack/health lists none of them). Its EC2 runs (with ec2 in SERVICES), but its
CloudFormation creates security groups without their rules: inline SecurityGroupIngress /
SecurityGroupEgress are dropped, and AWS::EC2::SecurityGroupIngress/Egress have no provider
(they "succeed" as no-ops; checked on 4.13.1 with ec2 on), so deployed groups would prove
nothing and the property tests check the rules instead. So this deploys, through
CloudFormation, the parts it can run: the token secret, the log group and the two roles.
References to the ECR repository become the literal ARN it would have. Then it reads them
back and checks, as AWS stores them:

- the secret holds a generated token (48 alphanumeric characters; never printed);
- the log group has the stack's retention and survives the stack's deletion (Retain), where
  LocalStack applies them (4.13.1 ignores both: the property tests check them instead);
- the execution role, as IAM returns it, allows every call of executor_service_calls.jsonl
  on the concrete ARN the ECS agent uses (the log stream under the group, the secret's ARN)
  and denies neighbours (another secret, a push); the task role, deployed with an artifact
  bucket, allows the store's calls on its runs/ keys and denies another bucket, another
  prefix and a delete;
- the task definition the service would register, with the real secret ARN and log group
  in place, is a valid ecs:RegisterTaskDefinition request (botocore's ECS model).

Run through scripts/deploy-localstack.sh, or `python localstack_executor_service.py` in
infra/tests with the AWS_* variables of `scripts/localstack.sh env`.
"""

from __future__ import annotations

import json
import re
import string
import sys
import time
from typing import Any

import boto3
from botocore.validate import ParamValidator

import executor_service_checks as es
import template_checks as tc

SUPPORTED = {"AWS::SecretsManager::Secret", "AWS::Logs::LogGroup", "AWS::IAM::Role"}
REPOSITORY_NAME = "rara-executor-localstack"
BUCKET = "rara-artifacts-localstack"  # ArtifactsBucketName: only named in the task role's grants
STREAM = "rara-worker/rara-worker/0123456789abcdef0123456789abcdef"  # prefix/container/task id


def _replace_repository(node: Any) -> Any:
    if isinstance(node, dict):
        if node in ({"Fn::GetAtt": [es.REPOSITORY, "Arn"]}, {"Fn::GetAtt": f"{es.REPOSITORY}.Arn"}):
            return {"Fn::Sub": f"arn:${{AWS::Partition}}:ecr:${{AWS::Region}}:${{AWS::AccountId}}:repository/{REPOSITORY_NAME}"}
        return {k: _replace_repository(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_replace_repository(v) for v in node]
    return node


def deployable_template(template: dict) -> tuple[dict, list[str]]:
    """The resources LocalStack can create, and the logical ids left out."""
    kept = {k: v for k, v in template["Resources"].items() if v["Type"] in SUPPORTED and "Condition" not in v}
    resources = _replace_repository(kept)
    conditions = _conditions_used(template.get("Conditions", {}), json.dumps(resources))
    body = json.dumps([resources, conditions])
    referenced = set(re.findall(r'"Ref": "(\w+)"', body)) | set(re.findall(r"\$\{(\w+)\}", body))
    missing = {
        r for r in set(re.findall(r'"Fn::GetAtt": \["(\w+)"', body)) | referenced if r in template["Resources"]
    } - set(kept)
    if missing:
        raise SystemExit(f"the deployable part references resources LocalStack cannot create: {sorted(missing)}")
    params = {k: v for k, v in template["Parameters"].items() if k in referenced}
    out = {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": "rara executor service: the parts LocalStack community can run",
        "Mappings": template.get("Mappings", {}),
        "Parameters": params,
        "Conditions": conditions,
        "Resources": resources,
    }
    return out, sorted(set(template["Resources"]) - set(kept))


def _conditions_used(conditions: dict, body: str) -> dict:
    """The template's conditions `body` names (Fn::If, Condition), with those they name in
    turn: CloudFormation refuses a template whose Fn::If names a condition it lacks."""
    used: dict = {}
    pending = set(re.findall(r'"Fn::If": \["(\w+)"', body)) | set(re.findall(r'"Condition": "(\w+)"', body))
    while pending:
        name = pending.pop()
        if name in used or name not in conditions:
            continue
        used[name] = conditions[name]
        pending |= set(re.findall(r'"Condition": "(\w+)"', json.dumps(conditions[name])))
    return used


def _camel(node: Any, keep: bool = False) -> Any:
    """CloudFormation's property names -> the ECS API's (PascalCase -> camelCase); the keys
    of `options` maps are data and stay."""
    if isinstance(node, dict):
        return {(k if keep else k[0].lower() + k[1:]): _camel(v, k in ("Options",)) for k, v in node.items()}
    if isinstance(node, list):
        return [_camel(v) for v in node]
    return node


def register_request(template: dict, real: dict[tc.Sym, str]) -> dict:
    """The RegisterTaskDefinition request the TaskDefinition resource becomes."""
    r = tc.resolve(template, {**es.REQUIRED_PARAMS, "ImageTag": "v1"})

    def substitute(node: Any) -> Any:
        if isinstance(node, tc.Sym):
            return real.get(node, f"<{node}>")
        if isinstance(node, str):
            node = re.sub(r"\$\{(\w+)\.(\w+)\}", lambda m: real.get(tc.Sym("GetAtt", m[1], m[2]), m[0]), node)
            return re.sub(r"\$\{(\w+)\}", lambda m: real.get(tc.Sym("Ref", m[1]), m[0]), node)
        if isinstance(node, dict):
            return {k: substitute(v) for k, v in node.items()}
        if isinstance(node, list):
            return [substitute(v) for v in node]
        return node

    return _camel(substitute(r.props(es.TASK_DEF)))


def _policy_statements(iam: Any, role: str) -> list[dict]:
    out = []
    for name in iam.list_role_policies(RoleName=role)["PolicyNames"]:
        doc = iam.get_role_policy(RoleName=role, PolicyName=name)["PolicyDocument"]
        doc = json.loads(doc) if isinstance(doc, str) else doc
        out += tc._as_list(doc["Statement"])
    return out


def check_task_role(iam: Any, role: str, expect: Any) -> None:
    """The task role, deployed with an artifact store, allows the store's calls of the
    fixture on the bucket's runs/ keys and nothing beside them."""
    statements = _policy_statements(iam, role)
    key = f"arn:aws:s3:::{BUCKET}/runs/0b7c/report/1/report.csv"
    for call in (c for c in es.load_calls() if c["role"] == es.TASK_ROLE):
        expect(es.allowed(statements, call["action"], key), f"{role} allows {call['action']} on {key} ({call['site']})")
    for action, resource in (
        ("s3:PutObject", key.replace(BUCKET, "other-bucket")),
        ("s3:GetObject", f"arn:aws:s3:::{BUCKET}/outside/report.csv"),
        ("s3:DeleteObject", key),
    ):
        expect(not es.allowed(statements, action, resource), f"{role} denies {action} on {resource}")
    expect(not iam.list_attached_role_policies(RoleName=role)["AttachedPolicies"], f"{role} has no managed policies")


def check_deployed(stack: str, template: dict, cfn: Any, problems: list[str]) -> dict[str, str]:
    iam, sm, logs = boto3.client("iam"), boto3.client("secretsmanager"), boto3.client("logs")
    physical = {
        r["LogicalResourceId"]: r["PhysicalResourceId"]
        for r in cfn.describe_stack_resources(StackName=stack)["StackResources"]
    }

    def expect(ok: bool, what: str) -> None:
        print(f"   {'ok' if ok else 'PROBLEM'}: {what}")
        if not ok:
            problems.append(f"executor service: {what}")

    secret_arn = sm.describe_secret(SecretId=physical[es.SECRET])["ARN"]
    value = sm.get_secret_value(SecretId=secret_arn)["SecretString"]  # checked, never printed
    try:
        credential = json.loads(value)
    except ValueError:
        credential = None
    token = credential.get(es.TOKEN_KEY, "") if isinstance(credential, dict) else ""
    expect(
        isinstance(credential, dict)
        and set(credential) == {es.TOKEN_KEY}
        and len(token) == 48
        and set(token) <= set(string.ascii_letters + string.digits),
        'the secret is {"token": a generated 48-character alphanumeric token} (the JSON rara reads)',
    )
    group_name = physical[es.LOG_GROUP]
    group = next(g for g in logs.describe_log_groups(logGroupNamePrefix=group_name)["logGroups"] if g["logGroupName"] == group_name)
    want_days = int(template["Parameters"]["LogRetentionInDays"]["Default"])
    if group.get("retentionInDays") is None:  # LocalStack 4.13.1's LogGroup provider drops it
        print(f"   n/a: LocalStack did not apply RetentionInDays to {group_name} (the property tests check it)")
    else:
        expect(group["retentionInDays"] == want_days, f"log group {group_name} keeps {group['retentionInDays']} days (want {want_days})")

    role = physical[es.EXECUTION_ROLE]
    statements = _policy_statements(iam, role)
    trust = iam.get_role(RoleName=role)["Role"]["AssumeRolePolicyDocument"]
    trust = json.loads(trust) if isinstance(trust, str) else trust
    expect([s["Principal"] for s in trust["Statement"]] == [{"Service": "ecs-tasks.amazonaws.com"}], "the execution role is for ecs-tasks only")
    repo_arn = f"arn:aws:ecr:{sm.meta.region_name}:{secret_arn.split(':')[4]}:repository/{REPOSITORY_NAME}"
    concrete = {
        "*": "*",
        f"GetAtt:{es.REPOSITORY}.Arn": repo_arn,
        f"Ref:{es.SECRET}": secret_arn,
        f"GetAtt:{es.LOG_GROUP}.Arn": f"{group['arn'].removesuffix(':*')}:log-stream:{STREAM}",
    }
    for call in (c for c in es.load_calls() if c["role"] == es.EXECUTION_ROLE):
        resource = concrete[call["resource"]]
        expect(es.allowed(statements, call["action"], resource), f"{role} allows {call['action']} on {resource} ({call['site']})")
    for action, resource in (
        ("ecr:PutImage", repo_arn),
        ("ecr:BatchGetImage", repo_arn.replace(REPOSITORY_NAME, "other")),
        ("secretsmanager:GetSecretValue", secret_arn.rsplit(":", 1)[0] + ":other-AbCdEf"),
        ("logs:PutLogEvents", concrete[f"GetAtt:{es.LOG_GROUP}.Arn"].replace(group_name, "/other")),
    ):
        expect(not es.allowed(statements, action, resource), f"{role} denies {action} on {resource}")
    expect(not iam.list_attached_role_policies(RoleName=role)["AttachedPolicies"], f"{role} has no managed policies")
    task_role = physical[es.TASK_ROLE]
    check_task_role(iam, task_role, expect)

    real = {
        tc.Sym("Ref", es.SECRET): secret_arn,
        tc.Sym("Ref", es.LOG_GROUP): group_name,
        tc.Sym("GetAtt", es.EXECUTION_ROLE, "Arn"): iam.get_role(RoleName=role)["Role"]["Arn"],
        tc.Sym("GetAtt", es.TASK_ROLE, "Arn"): iam.get_role(RoleName=task_role)["Role"]["Arn"],
        tc.Sym("GetAtt", es.REPOSITORY, "RepositoryUri"): f"{secret_arn.split(':')[4]}.dkr.ecr.{sm.meta.region_name}.amazonaws.com/{REPOSITORY_NAME}",
    }
    request = register_request(template, real)
    ecs = boto3.client("ecs")  # only its model: nothing is sent
    shape = ecs.meta.service_model.operation_model("RegisterTaskDefinition").input_shape
    report = ParamValidator().validate(request, shape)
    expect(not report.has_errors(), "the task definition is a valid ecs:RegisterTaskDefinition request" + (f": {report.generate_report()}" if report.has_errors() else ""))
    secrets = request["containerDefinitions"][0]["secrets"]
    want = f"{secret_arn}:{es.TOKEN_KEY}::"
    expect(secrets == [{"name": es.TOKENS_ENV, "valueFrom": want}], f"{es.TOKENS_ENV} comes from {want}")
    return {"log_group": group_name}


def deploy_and_check(keep: bool = False) -> list[str]:
    cfn, logs = boto3.client("cloudformation"), boto3.client("logs")
    template = es.load_template()
    body, left_out = deployable_template(template)
    stack = f"rara-executor-service-check-{int(time.time())}"
    print(f"== executor service: deploying {stack} ({', '.join(body['Resources'])})")
    print(f"   not in LocalStack community (ECS, ELBv2, ECR, EC2 off, Route 53 off): {', '.join(left_out)}")
    start = time.time()
    params = [{"ParameterKey": "ArtifactsBucketName", "ParameterValue": BUCKET}]
    cfn.create_stack(StackName=stack, TemplateBody=json.dumps(body), Parameters=params, Capabilities=["CAPABILITY_IAM"])
    problems: list[str] = []
    retained: dict[str, str] = {}
    try:
        cfn.get_waiter("stack_create_complete").wait(StackName=stack, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
        print(f"   created in {time.time() - start:.1f} s")
        retained = check_deployed(stack, template, cfn, problems)
    finally:
        if keep:
            print(f"   kept stack {stack}")
        else:
            cfn.delete_stack(StackName=stack)
            cfn.get_waiter("stack_delete_complete").wait(StackName=stack, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
            group = retained.get("log_group")
            if group:
                left = [g for g in logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"] if g["logGroupName"] == group]
                if left:
                    print(f"   ok: log group {group} outlives the stack (DeletionPolicy Retain); deleting it")
                    logs.delete_log_group(logGroupName=group)  # the check's own leftover
                else:  # LocalStack 4.13.1 deletes Retain resources with the stack
                    print("   n/a: LocalStack deleted the log group with the stack (it ignores DeletionPolicy Retain)")
    return problems


if __name__ == "__main__":
    found = deploy_and_check("--keep" in sys.argv)
    for p in found:
        print("PROBLEM:", p)
    sys.exit(1 if found else 0)
