"""Checks of infra/executor-service.yaml (the remote executor on ECS Fargate) that linters
do not make: the listener is HTTPS, the target group speaks gRPC and checks the health path
rara_worker serves, the security groups admit only the executor function to the load
balancer and only the load balancer to the tasks, the token secret is injected (never a
plain value), logs are kept, CPU target tracking exists, and the roles grant exactly the
calls of executor_service_calls.jsonl, nothing more: the execution role the ECS agent's, the
task role (with an artifact store, ArtifactsBucketName) the S3 calls of rara_worker's store.

Each check takes the template evaluated for one scenario (template_checks.resolve) and
returns a list of problems, so a test can break the template in memory and see the
problem named. `python infra/tests/executor_service_checks.py` prints the problems.
"""

from __future__ import annotations

import fnmatch
import json
import re
import sys
from pathlib import Path
from typing import Any, Iterable

import template_checks as tc
from template_checks import Resolved, Sym

TEMPLATE = tc.ROOT / "infra" / "executor-service.yaml"
TEMPLATE_NAME = "infra/executor-service.yaml"
CALLS = Path(__file__).resolve().parent / "executor_service_calls.jsonl"
DOCKERFILE = tc.ROOT / "executors" / "python" / "Dockerfile"

CONTAINER = "rara-worker"
CONTAINER_PORT = 50051
HEALTH_PATH = "/grpc.health.v1.Health/Check"  # grpc_health.v1, served by rara_worker.server
TOKENS_ENV = "RARA_EXECUTOR_TOKENS"
TOKEN_KEY = "token"  # the key of the secret's JSON (RARA_REMOTE_CREDENTIALS_SECRET_ARN's format)
ARTIFACTS_ENV = "RARA_ARTIFACTS_URI"  # rara_worker's --artifacts-uri
FARGATE_MAX_STOP_TIMEOUT = 120

# Logical ids the checks follow.
LB, LISTENER, TG = "LoadBalancer", "Listener", "TargetGroup"
CLIENT_SG, LB_SG, TASK_SG = "ClientSecurityGroup", "LoadBalancerSecurityGroup", "TaskSecurityGroup"
TASK_DEF, SERVICE, SECRET, LOG_GROUP = "TaskDefinition", "Service", "TokensSecret", "LogGroup"
EXECUTION_ROLE, TASK_ROLE, REPOSITORY = "ExecutionRole", "TaskRole", "Repository"

REQUIRED_PARAMS = {
    "VpcId": "vpc-0123456789abcdef0",
    "SubnetIds": "subnet-0123456789abcdef0,subnet-0123456789abcdef1",
    "CertificateArn": "arn:aws:acm:us-east-1:123456789012:certificate/0c7a6f2e-1111-2222-3333-444455556666",
}
SCENARIOS = {
    "bootstrap (no image yet)": {},
    "image": {"ImageTag": "0123abc"},
    "image x86 large": {"ImageTag": "0123abc", "CpuArchitecture": "X86_64", "TaskSize": "large"},
    "image + artifact store": {"ImageTag": "0123abc", "ArtifactsBucketName": "rara-artifactsbucket"},
    "image + DNS record + alarm topic": {
        "ImageTag": "0123abc",
        "EndpointName": "executors.internal.example.com",
        "PrivateHostedZoneId": "Z0123456789ABCDEFGHIJ",
        "AlarmTopicArn": "arn:aws:sns:us-east-1:123456789012:rara-alarms",
    },
}
RUNNING = ("TaskDefinition", "Service", "ScalableTarget", "CpuScaling", "NoHealthyTasksAlarm")


def load_template(path: Path | str = TEMPLATE) -> dict:
    return tc.load_template(path)


def scenarios() -> Iterable[tuple[str, dict[str, str]]]:
    for name, params in SCENARIOS.items():
        yield name, {**REQUIRED_PARAMS, **params}


def load_calls(path: Path | str = CALLS) -> list[dict]:
    """The fixture: one JSON object per line (role, action, resource, site, template)."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def symbol(value: Any) -> str:
    """A resolved resource in the fixture's notation: GetAtt:Name.Attr, Ref:Name, or literal."""
    if isinstance(value, Sym):
        return f"GetAtt:{value.resource}.{value.attr}" if value.kind == "GetAtt" else f"Ref:{value.resource}"
    return str(value)


def _ports(rule: dict) -> tuple[str, int | None, int | None]:
    def num(v: Any) -> int | None:
        return None if v is None else int(str(v))

    return str(rule.get("IpProtocol")), num(rule.get("FromPort")), num(rule.get("ToPort"))


def _container(r: Resolved) -> dict:
    for c in r.props(TASK_DEF).get("ContainerDefinitions", []):
        if c.get("Name") == CONTAINER:
            return c
    return {}


def command_flag(command: list, flag: str) -> str | None:
    """The value the server's argparse sees for `flag` (the last one wins)."""
    value = None
    for i, arg in enumerate(command[:-1]):
        if arg == flag:
            value = str(command[i + 1])
    return value


# ------------------------------------------------------------------ load balancer


def check_load_balancer(r: Resolved) -> list[str]:
    """Internal ALB, one HTTPS listener on 443 with the certificate, forwarding to the gRPC
    target group whose health check calls grpc.health.v1 and expects gRPC status 0."""
    problems = []
    lb = r.props(LB)
    if lb.get("Scheme") != "internal":
        problems.append(f"{LB}: Scheme is {lb.get('Scheme')!r}, not 'internal'")
    if lb.get("Type", "application") != "application":
        problems.append(f"{LB}: not an application load balancer")
    listeners = r.of_type("AWS::ElasticLoadBalancingV2::Listener")
    for name, res in listeners.items():
        p = res.get("Properties", {})
        if p.get("Protocol") != "HTTPS":
            problems.append(f"{name}: Protocol is {p.get('Protocol')!r}, not 'HTTPS'")
        if str(p.get("Port")) != "443":
            problems.append(f"{name}: Port is {p.get('Port')!r}, not 443")
        if [c.get("CertificateArn") for c in p.get("Certificates", [])] != [r.params["CertificateArn"]]:
            problems.append(f"{name}: the certificate is not the CertificateArn parameter")
        if not str(p.get("SslPolicy", "")).startswith("ELBSecurityPolicy-TLS13"):
            problems.append(f"{name}: SslPolicy {p.get('SslPolicy')!r} does not require TLS 1.2+ with 1.3")
        actions = p.get("DefaultActions", [])
        if [(a.get("Type"), a.get("TargetGroupArn")) for a in actions] != [("forward", Sym("Ref", TG))]:
            problems.append(f"{name}: does not forward to {TG}")
    if len(listeners) != 1:
        problems.append(f"{len(listeners)} listeners, want exactly the HTTPS one")
    tg = r.props(TG)
    want = {
        "ProtocolVersion": "GRPC",
        "Protocol": "HTTP",  # h2c to the tasks: rara_worker serves plaintext gRPC
        "TargetType": "ip",
        "HealthCheckPath": HEALTH_PATH,
        "Port": str(CONTAINER_PORT),
    }
    for key, value in want.items():
        if str(tg.get(key)) != value:
            problems.append(f"{TG}: {key} is {tg.get(key)!r}, not {value!r}")
    if tg.get("HealthCheckProtocol", "HTTP") != "HTTP":
        problems.append(f"{TG}: HealthCheckProtocol is {tg.get('HealthCheckProtocol')!r}")
    if str(tg.get("Matcher", {}).get("GrpcCode")) != "0":
        problems.append(f"{TG}: Matcher.GrpcCode is {tg.get('Matcher', {}).get('GrpcCode')!r}, not '0' (OK)")
    if tg.get("VpcId") != r.params["VpcId"]:
        problems.append(f"{TG}: not in the VpcId parameter's VPC")
    return problems


# ------------------------------------------------------------------ security groups


def sg_rules(r: Resolved) -> list[tuple[str, str, str, tuple]]:
    """Every rule as (direction, group, peer, (protocol, from, to)); peer is a group's
    logical id, a CIDR, or '?'."""
    rules = []

    def peer(rule: dict, *keys: str) -> str:
        for key in keys:
            value = rule.get(key)
            if isinstance(value, Sym):
                return value.resource
            if value is not None:
                return str(value)
        return "?"

    for name, res in r.of_type("AWS::EC2::SecurityGroup").items():
        p = res.get("Properties", {})
        for rule in p.get("SecurityGroupIngress", []):
            rules.append(("ingress", name, peer(rule, "SourceSecurityGroupId", "CidrIp", "CidrIpv6"), _ports(rule)))
        for rule in p.get("SecurityGroupEgress", []):
            rules.append(("egress", name, peer(rule, "DestinationSecurityGroupId", "CidrIp", "CidrIpv6"), _ports(rule)))
        if "SecurityGroupEgress" not in p:
            rules.append(("egress", name, "0.0.0.0/0", ("-1", None, None)))  # AWS's default
    for kind, direction, keys in (
        ("AWS::EC2::SecurityGroupIngress", "ingress", ("SourceSecurityGroupId", "CidrIp", "CidrIpv6")),
        ("AWS::EC2::SecurityGroupEgress", "egress", ("DestinationSecurityGroupId", "CidrIp", "CidrIpv6")),
    ):
        for res in r.of_type(kind).values():
            p = res.get("Properties", {})
            group = p.get("GroupId")
            rules.append((direction, group.resource if isinstance(group, Sym) else str(group), peer(p, *keys), _ports(p)))
    return rules


PLACEHOLDER = ("egress", "127.0.0.1/32", ("-1", None, None))


def check_security_groups(r: Resolved) -> list[str]:
    """Function -> load balancer on 443 -> tasks on the container port; nothing else in,
    and the client and load balancer groups send nowhere else."""
    problems = []
    https, grpc = ("tcp", 443, 443), ("tcp", CONTAINER_PORT, CONTAINER_PORT)
    want = {
        ("ingress", LB_SG): {(CLIENT_SG, https)},
        ("ingress", TASK_SG): {(LB_SG, grpc)},
        ("ingress", CLIENT_SG): set(),
        ("egress", CLIENT_SG): {(LB_SG, https)},
        ("egress", LB_SG): {(TASK_SG, grpc)},
    }
    have: dict[tuple[str, str], set] = {k: set() for k in want}
    for direction, group, peer, ports in sg_rules(r):
        if (direction, peer, ports) == PLACEHOLDER:
            continue
        if (direction, group) in have:
            have[(direction, group)].add((peer, ports))
        elif direction == "ingress":
            problems.append(f"{group}: unexpected ingress from {peer} {ports}")
    for key, rules in want.items():
        if have[key] != rules:
            problems.append(
                f"{key[1]} {key[0]}: {sorted(map(str, have[key]))}, want only {sorted(map(str, rules))}"
            )
    if r.props(LB).get("SecurityGroups") != [Sym("Ref", LB_SG)]:
        problems.append(f"{LB}: SecurityGroups is not [{LB_SG}]")
    if SERVICE in r.resources:
        vpc = r.props(SERVICE).get("NetworkConfiguration", {}).get("AwsvpcConfiguration", {})
        if vpc.get("SecurityGroups") != [Sym("Ref", TASK_SG)]:
            problems.append(f"{SERVICE}: SecurityGroups is not [{TASK_SG}]")
        if vpc.get("AssignPublicIp") != "DISABLED":
            problems.append(f"{SERVICE}: AssignPublicIp is {vpc.get('AssignPublicIp')!r}")
    if r.outputs.get("ClientSecurityGroupId") != Sym("Ref", CLIENT_SG):
        problems.append(f"output ClientSecurityGroupId is not {CLIENT_SG}")
    return problems


# ------------------------------------------------------------------ the task


def check_task(r: Resolved) -> list[str]:
    """The container: the token secret injected by the agent (never plain), logs to the
    retained log group, the port the target group uses, a stop timeout above the grace."""
    problems = []
    if TASK_DEF not in r.resources:
        return [f"{TASK_DEF} is missing"] if r.params.get("ImageTag") else []
    td = r.props(TASK_DEF)
    c = _container(r)
    if not c:
        return [f"{TASK_DEF}: no container {CONTAINER!r}"]
    if td.get("RequiresCompatibilities") != ["FARGATE"] or td.get("NetworkMode") != "awsvpc":
        problems.append(f"{TASK_DEF}: not a Fargate awsvpc task")
    secrets = {s.get("Name"): s.get("ValueFrom") for s in c.get("Secrets", [])}
    # The secret is the JSON the executor function reads too ({"token": ...}); the agent
    # injects its `token` key.
    if secrets.get(TOKENS_ENV) != f"${{{SECRET}}}:{TOKEN_KEY}::":
        problems.append(f"{TASK_DEF}: {TOKENS_ENV} is not injected from {SECRET}'s {TOKEN_KEY!r} key (Secrets/ValueFrom)")
    for env in c.get("Environment", []):
        name, value = str(env.get("Name")), env.get("Value")
        if name == TOKENS_ENV or tc.SECRET_NAME.search(name):
            problems.append(f"{TASK_DEF}: environment variable {name} is a plain secret")
        if isinstance(value, Sym) and value.resource == SECRET:
            problems.append(f"{TASK_DEF}: {SECRET} in plain environment variable {name}")
    bucket = r.params.get("ArtifactsBucketName")
    uri = {str(e.get("Name")): e.get("Value") for e in c.get("Environment", [])}.get(ARTIFACTS_ENV)
    if uri != (f"s3://{bucket}" if bucket else None):
        problems.append(f"{TASK_DEF}: {ARTIFACTS_ENV} is {uri!r} with ArtifactsBucketName {bucket!r}")
    secret = r.props(SECRET)
    if "SecretString" in secret or "GenerateSecretString" not in secret:
        problems.append(f"{SECRET}: the tokens must be generated (GenerateSecretString), never written in")
    elif secret["GenerateSecretString"].get("GenerateStringKey") != TOKEN_KEY:
        problems.append(f"{SECRET}: the generated value must be the JSON key {TOKEN_KEY!r} (the credentials rara reads)")
    image = c.get("Image")
    if not (isinstance(image, str) and image.startswith(f"${{{REPOSITORY}.RepositoryUri}}:")):
        problems.append(f"{TASK_DEF}: image {image!r} is not from {REPOSITORY}")
    log = c.get("LogConfiguration", {})
    if log.get("LogDriver") != "awslogs" or log.get("Options", {}).get("awslogs-group") != Sym("Ref", LOG_GROUP):
        problems.append(f"{TASK_DEF}: logs do not go to {LOG_GROUP} (awslogs)")
    ports = [str(p.get("ContainerPort")) for p in c.get("PortMappings", [])]
    command = [str(a) for a in c.get("Command", [])]
    if ports != [str(CONTAINER_PORT)] or command_flag(command, "--port") != str(CONTAINER_PORT):
        problems.append(f"{TASK_DEF}: port mapping {ports} / --port {command_flag(command, '--port')}, want {CONTAINER_PORT}")
    if command_flag(command, "--host") != "0.0.0.0":
        problems.append(f"{TASK_DEF}: the server does not bind 0.0.0.0 (the load balancer could not reach it)")
    grace = float(command_flag(command, "--grace") or 5)
    stop = int(str(c.get("StopTimeout", 30)))
    if not grace < stop <= FARGATE_MAX_STOP_TIMEOUT:
        problems.append(f"{TASK_DEF}: StopTimeout {stop} s must exceed --grace {grace:g} s (and be <= 120)")
    delay = {a.get("Key"): a.get("Value") for a in r.props(TG).get("TargetGroupAttributes", [])}.get(
        "deregistration_delay.timeout_seconds", 300
    )
    if float(str(delay)) < grace:
        problems.append(f"{TG}: deregistration delay {delay} s is shorter than --grace {grace:g} s")
    if td.get("ExecutionRoleArn") != Sym("GetAtt", EXECUTION_ROLE, "Arn"):
        problems.append(f"{TASK_DEF}: ExecutionRoleArn is not {EXECUTION_ROLE}")
    if td.get("TaskRoleArn") != Sym("GetAtt", TASK_ROLE, "Arn"):
        problems.append(f"{TASK_DEF}: TaskRoleArn is not {TASK_ROLE}")
    service = r.props(SERVICE)
    targets = [(lb.get("ContainerName"), str(lb.get("ContainerPort")), lb.get("TargetGroupArn")) for lb in service.get("LoadBalancers", [])]
    if targets != [(CONTAINER, str(CONTAINER_PORT), Sym("Ref", TG))]:
        problems.append(f"{SERVICE}: not registered in {TG} on {CONTAINER}:{CONTAINER_PORT}")
    return problems


def check_logs(r: Resolved) -> list[str]:
    """Every log group is retained (stack deletion or replacement) and has a retention."""
    problems = []
    for name, res in r.of_type("AWS::Logs::LogGroup").items():
        for policy in ("DeletionPolicy", "UpdateReplacePolicy"):
            if res.get(policy) != "Retain":
                problems.append(f"{name}: {policy} is {res.get(policy)!r}, not 'Retain'")
        if str(res.get("Properties", {}).get("RetentionInDays")) != str(r.params["LogRetentionInDays"]):
            problems.append(f"{name}: RetentionInDays is not the LogRetentionInDays parameter")
    if LOG_GROUP not in r.resources:
        problems.append(f"{LOG_GROUP} is missing")
    return problems


def check_autoscaling(r: Resolved) -> list[str]:
    """CPU target tracking on the service's desired count, between MinTasks and MaxTasks."""
    if SERVICE not in r.resources:
        return [] if not r.params.get("ImageTag") else [f"{SERVICE} is missing"]
    problems = []
    targets = r.of_type("AWS::ApplicationAutoScaling::ScalableTarget")
    on_service = {
        k: v["Properties"]
        for k, v in targets.items()
        if v["Properties"].get("ScalableDimension") == "ecs:service:DesiredCount"
        and v["Properties"].get("ServiceNamespace") == "ecs"
        and f"/${{{SERVICE}.Name}}" in str(v["Properties"].get("ResourceId"))
    }
    if len(on_service) != 1:
        return [f"{len(on_service)} scalable targets on {SERVICE}'s desired count, want 1"]
    (target, p), = on_service.items()
    if (str(p.get("MinCapacity")), str(p.get("MaxCapacity"))) != (r.params["MinTasks"], r.params["MaxTasks"]):
        problems.append(f"{target}: capacity is not MinTasks..MaxTasks")
    cpu = [
        v["Properties"]
        for v in r.of_type("AWS::ApplicationAutoScaling::ScalingPolicy").values()
        if v["Properties"].get("ScalingTargetId") == Sym("Ref", target)
        and v["Properties"].get("PolicyType") == "TargetTrackingScaling"
        and v["Properties"]
        .get("TargetTrackingScalingPolicyConfiguration", {})
        .get("PredefinedMetricSpecification", {})
        .get("PredefinedMetricType")
        == "ECSServiceAverageCPUUtilization"
    ]
    if len(cpu) != 1:
        problems.append(f"{len(cpu)} CPU target tracking policies on {target}, want 1")
    elif str(cpu[0]["TargetTrackingScalingPolicyConfiguration"].get("TargetValue")) != r.params["CpuTargetPercent"]:
        problems.append("the CPU target is not the CpuTargetPercent parameter")
    return problems


def check_alarm(r: Resolved) -> list[str]:
    """An alarm when fewer than one target of the target group is healthy."""
    if SERVICE not in r.resources:
        return []
    for alarm in r.of_type("AWS::CloudWatch::Alarm").values():
        p = alarm["Properties"]
        dims = {d.get("Name"): d.get("Value") for d in p.get("Dimensions", [])}
        if (
            (p.get("Namespace"), p.get("MetricName")) == ("AWS/ApplicationELB", "HealthyHostCount")
            and dims.get("TargetGroup") == Sym("GetAtt", TG, "TargetGroupFullName")
            and dims.get("LoadBalancer") == Sym("GetAtt", LB, "LoadBalancerFullName")
            and p.get("ComparisonOperator") == "LessThanThreshold"
            and str(p.get("Threshold")) == "1"
            and p.get("TreatMissingData") == "breaching"
        ):
            return []
    return [f"no alarm on {TG}'s HealthyHostCount < 1 (missing data breaching)"]


# ------------------------------------------------------------------ IAM


def role_statements(r: Resolved, role: str) -> list[dict]:
    props = r.props(role)
    return [
        st
        for policy in props.get("Policies", [])
        for st in tc._as_list(policy.get("PolicyDocument", {}).get("Statement", []))
    ]


# The only condition a grant may carry: every call is made over TLS.
TLS_ONLY = {"Bool": {"aws:SecureTransport": "true"}}
# The task role's S3 grants end in this prefix (the artifact store's layout, runs/{run}/...).
RUNS_PREFIX = "/runs/*"


def allowed(statements: list[dict], action: str, resource: str) -> bool:
    """A small IAM evaluation for the calls of the fixture: an explicit Deny wins, then any
    Allow whose actions and resources match (IAM's `*`/`?` globs, case-insensitive actions)
    and whose condition, if any, is TLS-only (the calls are made over TLS)."""

    def matches(st: dict) -> bool:
        actions = [str(a).lower() for a in tc._as_list(st.get("Action", []))]
        resources = [symbol(x) for x in tc._as_list(st.get("Resource", []))]
        return any(fnmatch.fnmatchcase(action.lower(), a) for a in actions) and any(
            res == resource or (res != resource and "*" in res and fnmatch.fnmatchcase(resource, res))
            for res in resources
        )

    if any(st.get("Effect") == "Deny" and matches(st) for st in statements):
        return False
    return any(
        st.get("Effect") == "Allow" and st.get("Condition", TLS_ONLY) == TLS_ONLY and matches(st) for st in statements
    )


def call_resource(r: Resolved, resource: str) -> str:
    """A fixture resource as the scenario resolves it: `Sub:text` with the parameters and
    pseudo parameters substituted; GetAtt:, Ref:, * and ARNs as they are."""
    if not resource.startswith("Sub:"):
        return resource
    values = {**tc.PSEUDO, **r.params}
    return re.sub(r"\$\{([^}]+)\}", lambda m: str(values.get(m.group(1), m.group(0))), resource[len("Sub:"):])


def role_calls(r: Resolved, calls: list[dict], role: str) -> list[dict]:
    """The fixture's calls `role` makes in this scenario, resources resolved: the task role's
    (the artifact store's) only with ArtifactsBucketName."""
    if role == TASK_ROLE and not r.params.get("ArtifactsBucketName"):
        return []
    return [
        {**c, "resource": call_resource(r, c["resource"])}
        for c in calls
        if c.get("template") == TEMPLATE_NAME and c.get("role") == role
    ]


def wildcard_allowed(role: str, action: str, resource: str) -> bool:
    """`*` in a resource: ecr:GetAuthorizationToken has no resource-level permission; the
    task role's S3 grants cover the store's runs/ prefix, nothing wider."""
    if role == EXECUTION_ROLE:
        return action == "ecr:GetAuthorizationToken"
    return action.startswith("s3:") and resource.endswith(RUNS_PREFIX) and resource.count("*") == 1


def check_roles(r: Resolved, calls: list[dict] | None = None) -> list[str]:
    """Each role allows every call of the fixture it makes in the scenario and grants nothing
    else: no wildcard action, `*` in a resource only where `wildcard_allowed` says, no
    managed policy, assumable by ecs-tasks only. The task role's grants are TLS-only; without
    an artifact store it has none."""
    calls = load_calls() if calls is None else calls
    problems = []
    for role in (EXECUTION_ROLE, TASK_ROLE):
        statements = role_statements(r, role)
        trust = r.props(role).get("AssumeRolePolicyDocument", {}).get("Statement", [])
        if [st.get("Principal") for st in trust] != [{"Service": "ecs-tasks.amazonaws.com"}]:
            problems.append(f"{role}: not assumable by ecs-tasks.amazonaws.com only")
        if r.props(role).get("ManagedPolicyArns"):
            problems.append(f"{role}: managed policies grant more than the calls need")
        needed = role_calls(r, calls, role)
        for call in needed:
            if not allowed(statements, call["action"], call["resource"]):
                problems.append(f"{role} denies {call['action']} on {call['resource']} ({call['site']})")
        for st in statements:
            if st.get("Effect") != "Allow":
                continue
            if "NotAction" in st or "NotResource" in st:
                problems.append(f"{role}: NotAction/NotResource")
                continue
            if role == TASK_ROLE and st.get("Condition") != TLS_ONLY:
                problems.append(f"{role}: statement {st.get('Sid', '?')} is not TLS-only (aws:SecureTransport)")
            for action in map(str, tc._as_list(st.get("Action", []))):
                if "*" in action or "?" in action:
                    problems.append(f"{role}: wildcard action {action}")
                for res in map(symbol, tc._as_list(st.get("Resource", []))):
                    if "*" in res and not wildcard_allowed(role, action, res):
                        problems.append(f"{role}: {action} on wildcard resource {res!r}")
                    if not any(
                        c["action"] == action and (c["resource"] == res or ("*" in res and fnmatch.fnmatchcase(c["resource"], res)))
                        for c in needed
                    ):
                        problems.append(f"{role}: grants {action} on {res}, which no call of the fixture needs")
    return problems


def check_calls_fixture(template: dict, calls: list[dict]) -> list[str]:
    """The fixture's format (FIXED: read by the policy evaluator) and its references."""
    problems = []
    keys = {"role", "action", "resource", "site", "template"}
    for i, call in enumerate(calls, 1):
        if set(call) != keys:
            problems.append(f"calls line {i}: keys {sorted(call)}, want {sorted(keys)}")
            continue
        if call["template"] == TEMPLATE_NAME and call["role"] not in template["Resources"]:
            problems.append(f"calls line {i}: no role {call['role']} in {TEMPLATE_NAME}")
        m = re.fullmatch(r"(GetAtt):(\w+)\.\w+|(Ref):(\w+)", call["resource"])
        if m and (m.group(2) or m.group(4)) not in template["Resources"]:
            problems.append(f"calls line {i}: {call['resource']} names no resource")
        elif call["resource"].startswith("Sub:"):
            names = set(re.findall(r"\$\{([^}]+)\}", call["resource"]))
            unknown = names - set(tc.PSEUDO) - set(template.get("Parameters", {}))
            if unknown:
                problems.append(f"calls line {i}: {call['resource']} names no parameter {sorted(unknown)}")
        elif not m and not (call["resource"] == "*" or call["resource"].startswith("arn:")):
            problems.append(f"calls line {i}: resource {call['resource']!r} is not GetAtt:, Ref:, Sub:, * or an ARN")
        if not re.fullmatch(r"[a-z0-9-]+:[A-Za-z0-9]+", call["action"]):
            problems.append(f"calls line {i}: action {call['action']!r}")
    return problems


def check_outputs(r: Resolved) -> list[str]:
    endpoint = str(r.outputs.get("Endpoint"))
    host = r.params.get("EndpointName") or f"${{{LB}.DNSName}}"
    want = f"https://{host}:443"
    return [] if endpoint == want else [f"output Endpoint is {endpoint!r}, not {want!r}"]


SCENARIO_CHECKS = (
    check_load_balancer,
    check_security_groups,
    check_task,
    check_logs,
    check_autoscaling,
    check_alarm,
    check_roles,
    check_outputs,
)


def all_problems(template: dict, calls: list[dict] | None = None) -> list[str]:
    calls = load_calls() if calls is None else calls
    problems = check_calls_fixture(template, calls)
    seen: set[str] = set()
    for name, params in scenarios():
        try:
            r = tc.resolve(template, params, name)
        except tc.EvalError as e:
            problems.append(f"[{name}] cannot evaluate the template: {e}")
            continue
        running = [k for k in RUNNING if k in r.resources]
        if bool(running) != bool(params.get("ImageTag")) or (running and len(running) != len(RUNNING)):
            problems.append(f"[{name}] ImageTag={params.get('ImageTag', '')!r} but {running} exist")
        for check in SCENARIO_CHECKS:
            found = check(r, calls) if check is check_roles else check(r)
            for p in found:
                if p not in seen:
                    seen.add(p)
                    problems.append(f"[{name}] {p}")
    return problems


if __name__ == "__main__":
    found = all_problems(load_template(Path(sys.argv[1]) if len(sys.argv) > 1 else TEMPLATE))
    for p in found:
        print(p)
    print(f"{len(found)} problem(s)")
    sys.exit(1 if found else 0)
