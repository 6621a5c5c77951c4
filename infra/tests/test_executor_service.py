"""Property tests of infra/executor-service.yaml (run by scripts/check-template.sh).

The first tests prove the stack has none of the problems executor_service_checks.py looks
for, in every scenario (before the image exists, with it, on x86, with a DNS record). The
mutation tests break one property at a time in memory and prove the checker names it.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Callable

import pytest

import executor_service_checks as es
import template_checks as tc


@pytest.fixture(scope="module")
def template() -> dict:
    return es.load_template()


@pytest.fixture(scope="module")
def calls() -> list[dict]:
    return es.load_calls()


def test_the_stack_has_no_problems_in_any_scenario(template, calls):
    assert es.all_problems(template, calls) == []


def test_nothing_runs_before_the_image_exists(template):
    bootstrap = tc.resolve(template, es.REQUIRED_PARAMS)
    running = tc.resolve(template, {**es.REQUIRED_PARAMS, "ImageTag": "v1"})
    assert not set(es.RUNNING) & set(bootstrap.resources)
    assert set(es.RUNNING) <= set(running.resources)
    # What the first deploy creates is what the service needs to start later.
    assert {"Repository", "TokensSecret", "LogGroup", "ExecutionRole", "LoadBalancer", "Listener"} <= set(
        bootstrap.resources
    )


def test_the_calls_fixture_is_the_execution_role_exactly(template, calls):
    """Spot-check by value, independent of the checker: six calls, each allowed; the role's
    grants, read off the template, are these pairs and no others."""
    r = tc.resolve(template, {**es.REQUIRED_PARAMS, "ImageTag": "v1"})
    pairs = {(c["action"], c["resource"]) for c in calls if c["role"] == "ExecutionRole"}
    assert pairs == {
        ("ecr:GetAuthorizationToken", "*"),
        ("ecr:BatchGetImage", "GetAtt:Repository.Arn"),
        ("ecr:GetDownloadUrlForLayer", "GetAtt:Repository.Arn"),
        ("secretsmanager:GetSecretValue", "Ref:TokensSecret"),
        ("logs:CreateLogStream", "GetAtt:LogGroup.Arn"),
        ("logs:PutLogEvents", "GetAtt:LogGroup.Arn"),
    }
    granted = {
        (a, es.symbol(res))
        for st in es.role_statements(r, es.EXECUTION_ROLE)
        for a in tc._as_list(st["Action"])
        for res in tc._as_list(st["Resource"])
    }
    assert granted == pairs
    assert {c["role"] for c in calls} == {"ExecutionRole", "TaskRole"}
    assert {c["template"] for c in calls} == {"infra/executor-service.yaml"}


def test_the_task_role_reaches_the_artifact_store_only_when_it_is_given(template, calls):
    """By value: with ArtifactsBucketName, the task role grants what rara_worker's S3 store
    calls (a write, multipart or not, its abort, a read) under runs/ over TLS, and the container
    gets the store's URI; without it, no grant and no URI."""
    bucket = "rara-artifacts-123"
    r = tc.resolve(template, {**es.REQUIRED_PARAMS, "ImageTag": "v1", "ArtifactsBucketName": bucket})
    statements = es.role_statements(r, es.TASK_ROLE)
    granted = {(a, res) for st in statements for a in tc._as_list(st["Action"]) for res in tc._as_list(st["Resource"])}
    runs = f"arn:aws:s3:::{bucket}/runs/*"
    assert granted == {("s3:PutObject", runs), ("s3:AbortMultipartUpload", runs), ("s3:GetObject", runs)}
    assert all(st["Condition"] == {"Bool": {"aws:SecureTransport": "true"}} for st in statements)
    task = [c for c in calls if c["role"] == "TaskRole"]
    assert {c["action"] for c in task} == {a for a, _ in granted}
    for call in task:
        assert es.allowed(statements, call["action"], es.call_resource(r, call["resource"])), call["site"]
    assert not es.allowed(statements, "s3:DeleteObject", f"arn:aws:s3:::{bucket}/runs/x")
    assert not es.allowed(statements, "s3:GetObject", f"arn:aws:s3:::{bucket}/other/x")
    env = r.props("TaskDefinition")["ContainerDefinitions"][0]["Environment"]
    assert env == [{"Name": "RARA_ARTIFACTS_URI", "Value": f"s3://{bucket}"}]

    bare = tc.resolve(template, {**es.REQUIRED_PARAMS, "ImageTag": "v1"})
    assert "Policies" not in bare.props(es.TASK_ROLE)
    assert "Environment" not in bare.props("TaskDefinition")["ContainerDefinitions"][0]


def test_the_evaluation_denies_what_the_role_does_not_grant(template):
    r = tc.resolve(template, {**es.REQUIRED_PARAMS, "ImageTag": "v1"})
    statements = es.role_statements(r, es.EXECUTION_ROLE)
    assert es.allowed(statements, "ecr:BatchGetImage", "GetAtt:Repository.Arn")
    assert not es.allowed(statements, "ecr:PutImage", "GetAtt:Repository.Arn")
    assert not es.allowed(statements, "ecr:BatchGetImage", "arn:aws:ecr:us-east-1:123456789012:repository/other")
    assert not es.allowed(statements, "secretsmanager:GetSecretValue", "arn:aws:secretsmanager:us-east-1:1:secret:x")
    deny = {"Effect": "Deny", "Action": "ecr:*", "Resource": "*"}
    assert not es.allowed([*statements, deny], "ecr:BatchGetImage", "GetAtt:Repository.Arn")


# ------------------------------------------------------------------ mutations


def _props(name: str) -> Callable[[dict], dict]:
    return lambda t: t["Resources"][name]["Properties"]


def _container(t: dict) -> dict:
    return t["Resources"]["TaskDefinition"]["Properties"]["ContainerDefinitions"][0]


def _statement(t: dict, sid: str) -> dict:
    for st in t["Resources"]["ExecutionRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]:
        if st.get("Sid") == sid:
            return st
    raise KeyError(sid)


def _statements(t: dict) -> list:
    return t["Resources"]["ExecutionRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]


def _task_statement(t: dict) -> dict:
    """The task role's artifact grant (its Policies under `!If HasArtifacts`)."""
    return t["Resources"]["TaskRole"]["Properties"]["Policies"]["Fn::If"][1][0]["PolicyDocument"]["Statement"][0]


def _set(name: str, **values: Any) -> Callable[[dict], None]:
    return lambda t: t["Resources"][name]["Properties"].update(values)


def _add_resource(name: str, resource: dict) -> Callable[[dict], None]:
    return lambda t: t["Resources"].update({name: resource})


listener, tg = _props("Listener"), _props("TargetGroup")

MUTATIONS: dict[str, tuple[Callable[[dict], None], str]] = {
    # the listener and the load balancer
    "listener HTTP": (_set("Listener", Protocol="HTTP"), "Listener: Protocol is 'HTTP', not 'HTTPS'"),
    "listener on 80": (_set("Listener", Port=80), "Listener: Port is 80, not 443"),
    "another certificate": (
        lambda t: listener(t)["Certificates"][0].update(CertificateArn="arn:aws:acm:us-east-1:123456789012:certificate/x"),
        "Listener: the certificate is not the CertificateArn parameter",
    ),
    "TLS 1.0 policy": (_set("Listener", SslPolicy="ELBSecurityPolicy-2016-08"), "does not require TLS 1.2+"),
    "a second, plain listener": (
        lambda t: t["Resources"].update(
            Plain={"Type": "AWS::ElasticLoadBalancingV2::Listener", "Properties": {**copy.deepcopy(listener(t)), "Protocol": "HTTP", "Port": 80}}
        ),
        "2 listeners, want exactly the HTTPS one",
    ),
    "internet-facing": (_set("LoadBalancer", Scheme="internet-facing"), "LoadBalancer: Scheme is 'internet-facing'"),
    # the target group
    "target group HTTP/1.1": (_set("TargetGroup", ProtocolVersion="HTTP1"), "ProtocolVersion is 'HTTP1', not 'GRPC'"),
    "health check on /": (_set("TargetGroup", HealthCheckPath="/"), "HealthCheckPath is '/'"),
    "health check ALB default code": (
        lambda t: tg(t)["Matcher"].update(GrpcCode="12"),
        "Matcher.GrpcCode is '12', not '0' (OK)",
    ),
    "TLS to a plaintext server": (_set("TargetGroup", Protocol="HTTPS"), "TargetGroup: Protocol is 'HTTPS'"),
    "target group on another port": (_set("TargetGroup", Port=8080), "TargetGroup: Port is 8080"),
    # security groups
    "load balancer open to the VPC": (
        lambda t: _props("LoadBalancerSecurityGroup")(t)["SecurityGroupIngress"].append(
            {"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "CidrIp": "10.0.0.0/8"}
        ),
        "LoadBalancerSecurityGroup ingress:",
    ),
    "tasks reachable from the function directly": (
        lambda t: _props("TaskSecurityGroup")(t)["SecurityGroupIngress"][0].update(
            SourceSecurityGroupId={"Ref": "ClientSecurityGroup"}
        ),
        "TaskSecurityGroup ingress:",
    ),
    "tasks open through a separate rule": (
        _add_resource(
            "Open",
            {
                "Type": "AWS::EC2::SecurityGroupIngress",
                "Properties": {"GroupId": {"Ref": "TaskSecurityGroup"}, "IpProtocol": "tcp", "FromPort": 50051, "ToPort": 50051, "CidrIp": "0.0.0.0/0"},
            },
        ),
        "('0.0.0.0/0', ('tcp', 50051, 50051))",
    ),
    "client group with default egress": (
        lambda t: _props("ClientSecurityGroup")(t).pop("SecurityGroupEgress"),
        "ClientSecurityGroup egress:",
    ),
    "load balancer sends anywhere": (
        lambda t: _props("LoadBalancerToTasks")(t).update(CidrIp="0.0.0.0/0", DestinationSecurityGroupId=None),
        "LoadBalancerSecurityGroup egress:",
    ),
    "service with a public IP": (
        lambda t: _props("Service")(t)["NetworkConfiguration"]["AwsvpcConfiguration"].update(AssignPublicIp="ENABLED"),
        "Service: AssignPublicIp is 'ENABLED'",
    ),
    "service in the load balancer's group": (
        lambda t: _props("Service")(t)["NetworkConfiguration"]["AwsvpcConfiguration"].update(
            SecurityGroups=[{"Ref": "LoadBalancerSecurityGroup"}]
        ),
        "Service: SecurityGroups is not [TaskSecurityGroup]",
    ),
    "client group not in the outputs": (lambda t: t["Outputs"].pop("ClientSecurityGroupId"), "output ClientSecurityGroupId"),
    # the secret
    "tokens as a plain variable": (
        lambda t: (_container(t).pop("Secrets"), _container(t).update(Environment=[{"Name": "RARA_EXECUTOR_TOKENS", "Value": "x"}])),
        "RARA_EXECUTOR_TOKENS is not injected from TokensSecret's 'token' key",
    ),
    "secret ARN in the environment": (
        lambda t: _container(t).update(Environment=[{"Name": "TOKENS_ARN", "Value": {"Ref": "TokensSecret"}}]),
        "TokensSecret in plain environment variable TOKENS_ARN",
    ),
    "tokens injected as the whole JSON": (
        lambda t: _container(t).update(Secrets=[{"Name": "RARA_EXECUTOR_TOKENS", "ValueFrom": {"Ref": "TokensSecret"}}]),
        "RARA_EXECUTOR_TOKENS is not injected from TokensSecret's 'token' key",
    ),
    "generated value not under the token key": (
        lambda t: _props("TokensSecret")(t)["GenerateSecretString"].pop("GenerateStringKey"),
        "the generated value must be the JSON key 'token'",
    ),
    "tokens written in the template": (
        lambda t: _props("TokensSecret")(t).update(SecretString="hunter2hunter2"),
        "the tokens must be generated",
    ),
    # logs
    "log group deleted with the stack": (
        lambda t: t["Resources"]["LogGroup"].update(DeletionPolicy="Delete"),
        "LogGroup: DeletionPolicy is 'Delete'",
    ),
    "log group replaced without a copy": (
        lambda t: t["Resources"]["LogGroup"].pop("UpdateReplacePolicy"),
        "LogGroup: UpdateReplacePolicy is None",
    ),
    "logs kept forever": (lambda t: _props("LogGroup")(t).pop("RetentionInDays"), "RetentionInDays is not the"),
    "container logs elsewhere": (
        lambda t: _container(t)["LogConfiguration"]["Options"].update({"awslogs-group": "/other"}),
        "logs do not go to LogGroup",
    ),
    # the task
    "stop timeout below the grace": (
        lambda t: t["Mappings"]["Shutdown"]["worker"].update(StopTimeout=20),
        "StopTimeout 20 s must exceed --grace 30 s",
    ),
    "draining shorter than the grace": (
        lambda t: t["Mappings"]["Shutdown"]["worker"].update(DeregistrationDelay="10"),
        "deregistration delay 10 s is shorter than --grace 30 s",
    ),
    "server on loopback": (lambda t: _container(t)["Command"].__setitem__(1, "127.0.0.1"), "does not bind 0.0.0.0"),
    "server on another port": (lambda t: _container(t)["Command"].__setitem__(3, "50052"), "--port 50052, want 50051"),
    "image from elsewhere": (lambda t: _container(t).update(Image="python:3.11"), "is not from Repository"),
    "service without the image condition": (
        lambda t: t["Resources"]["ScalableTarget"].pop("Condition"),
        "ImageTag='' but",
    ),
    # autoscaling
    "no CPU scaling policy": (lambda t: t["Resources"].pop("CpuScaling"), "0 CPU target tracking policies"),
    "scaling on memory": (
        lambda t: _props("CpuScaling")(t)["TargetTrackingScalingPolicyConfiguration"]["PredefinedMetricSpecification"].update(
            PredefinedMetricType="ECSServiceAverageMemoryUtilization"
        ),
        "0 CPU target tracking policies",
    ),
    "fixed capacity": (_set("ScalableTarget", MaxCapacity=2), "capacity is not MinTasks..MaxTasks"),
    # alarm
    "no health alarm": (lambda t: t["Resources"].pop("NoHealthyTasksAlarm"), "no alarm on TargetGroup's HealthyHostCount"),
    "health alarm quiet without data": (
        _set("NoHealthyTasksAlarm", TreatMissingData="notBreaching"),
        "no alarm on TargetGroup's HealthyHostCount",
    ),
    # IAM
    "execution role ecr:*": (lambda t: _statement(t, "PullImage").update(Action="ecr:*"), "wildcard action ecr:*"),
    "pull from any repository": (
        lambda t: _statement(t, "PullImage").update(Resource="*"),
        "ecr:BatchGetImage on wildcard resource '*'",
    ),
    "any secret": (
        lambda t: _statement(t, "InjectTokens").update(
            Resource={"Fn::Sub": "arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:*"}
        ),
        "secretsmanager:GetSecretValue on wildcard resource",
    ),
    "cannot read the tokens": (
        lambda t: _statements(t).remove(_statement(t, "InjectTokens")),
        "ExecutionRole denies secretsmanager:GetSecretValue on Ref:TokensSecret (ECS agent: inject",
    ),
    "cannot write logs": (
        lambda t: _statement(t, "Logs").update(Action="logs:CreateLogStream"),
        "ExecutionRole denies logs:PutLogEvents on GetAtt:LogGroup.Arn",
    ),
    "may create log groups": (
        lambda t: _statement(t, "Logs").update(Action=["logs:CreateLogStream", "logs:PutLogEvents", "logs:CreateLogGroup"]),
        "grants logs:CreateLogGroup on GetAtt:LogGroup.Arn, which no call of the fixture needs",
    ),
    "AWS managed execution policy": (
        _set("ExecutionRole", ManagedPolicyArns=["arn:aws:iam::aws:policy/service-role/AmazonECSTaskExecutionRolePolicy"]),
        "managed policies grant more",
    ),
    "task role with permissions": (
        _set("TaskRole", Policies=[{"PolicyName": "x", "PolicyDocument": {"Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]}}]),
        "TaskRole: s3:GetObject on wildcard resource '*'",
    ),
    "task role's S3 grant not TLS-only": (
        lambda t: _task_statement(t).pop("Condition"),
        "TaskRole: statement Artifacts is not TLS-only",
    ),
    "task role may delete artifacts": (
        lambda t: _task_statement(t)["Action"].append("s3:DeleteObject"),
        "TaskRole: grants s3:DeleteObject on arn:aws:s3:::rara-artifactsbucket/runs/*, which no call of the fixture needs",
    ),
    "task role reaches the whole bucket": (
        lambda t: _task_statement(t).update(Resource={"Fn::Sub": "arn:${AWS::Partition}:s3:::${ArtifactsBucketName}/*"}),
        "TaskRole: s3:PutObject on wildcard resource 'arn:aws:s3:::rara-artifactsbucket/*'",
    ),
    "task role cannot read artifacts": (
        lambda t: _task_statement(t)["Action"].remove("s3:GetObject"),
        "TaskRole denies s3:GetObject on arn:aws:s3:::rara-artifactsbucket/runs/{run}/{step}/{attempt}/report.csv",
    ),
    "no artifact store for the container": (
        lambda t: _container(t).pop("Environment"),
        "TaskDefinition: RARA_ARTIFACTS_URI is None with ArtifactsBucketName 'rara-artifactsbucket'",
    ),
    "execution role assumable by Lambda": (
        lambda t: _props("ExecutionRole")(t)["AssumeRolePolicyDocument"]["Statement"][0].update(Principal={"Service": "lambda.amazonaws.com"}),
        "not assumable by ecs-tasks.amazonaws.com only",
    ),
    # outputs
    "plaintext endpoint": (
        lambda t: t["Outputs"]["Endpoint"]["Value"]["Fn::If"][2].update({"Fn::Sub": "http://${LoadBalancer.DNSName}:80"}),
        "output Endpoint is 'http://${LoadBalancer.DNSName}:80'",
    ),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_a_broken_property_is_reported(template, calls, name):
    mutate, expected = MUTATIONS[name]
    broken = copy.deepcopy(template)
    mutate(broken)
    problems = es.all_problems(broken, calls)
    assert any(expected in p for p in problems), f"{name}: expected {expected!r} in\n" + "\n".join(problems)


CALL_MUTATIONS: dict[str, tuple[Callable[[list[dict]], None], str]] = {
    "a call the role does not allow": (
        lambda c: c.append({**c[1], "action": "ecr:PutImage", "site": "someone pushes"}),
        "ExecutionRole denies ecr:PutImage on GetAtt:Repository.Arn (someone pushes)",
    ),
    "a call dropped (the grant becomes unexplained)": (
        lambda c: c.pop(3),
        "grants secretsmanager:GetSecretValue on Ref:TokensSecret, which no call of the fixture needs",
    ),
    "the task role's read dropped": (
        lambda c: c.remove(next(x for x in c if x["action"] == "s3:GetObject")),
        "TaskRole: grants s3:GetObject on arn:aws:s3:::rara-artifactsbucket/runs/*, which no call of the fixture needs",
    ),
    "a parameter the template lacks": (
        lambda c: c[-1].update(resource="Sub:arn:aws:s3:::${Bucket}/runs/x"),
        "names no parameter ['Bucket']",
    ),
    "an unknown resource": (lambda c: c[1].update(resource="GetAtt:Repo.Arn"), "GetAtt:Repo.Arn names no resource"),
    "a field missing": (lambda c: c[0].pop("site"), "calls line 1: keys"),
    "a role not in the template": (lambda c: c[0].update(role="TaskExecutionRole"), "no role TaskExecutionRole"),
}


@pytest.mark.parametrize("name", list(CALL_MUTATIONS))
def test_a_broken_calls_fixture_is_reported(template, calls, name):
    mutate, expected = CALL_MUTATIONS[name]
    broken = copy.deepcopy(calls)
    mutate(broken)
    problems = es.all_problems(template, broken)
    assert any(expected in p for p in problems), f"{name}: expected {expected!r} in\n" + "\n".join(problems)


def test_the_calls_fixture_is_one_json_object_per_line():
    with open(es.CALLS) as f:
        lines = f.read().splitlines()
    assert lines and all(isinstance(json.loads(line), dict) for line in lines)
