"""Checks of infra/template.yaml that linters do not make.

cfn-lint and `sam validate` check types and references; they do not know that the queue's
visibility timeout, the redrive policy and the functions' RARA_* variables must agree
(DESIGN.md, "Alignment of SQS and leases"), nor that a misspelt FunctionResponseTypes
value silently turns partial batch responses off. This module evaluates the template for
given parameter values (a small CloudFormation intrinsic-function evaluator) and runs
checks that each return a list of problems (empty = fine), so a test can break the
template in memory and see the problem reported.

Usage: `python infra/tests/template_checks.py [infra/template.yaml]` prints every
problem over every scenario and exits 1 if there is one.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "infra" / "template.yaml"
SAMCONFIG = ROOT / "samconfig.toml"

# The rules the functions enforce at start (shared/domain/src/config.rs).
RECEIVE_COUNT_MARGIN = 3  # maxReceiveCount >= RARA_MAX_ATTEMPTS_LIMIT + 3
HEARTBEAT_DIVISOR = 3  # heartbeat <= min(lease, visibility) / 3
DEADLINE_MARGIN_SECONDS = 2  # RARA_DEADLINE_MARGIN_MS default (shared/runtime/src/settings.rs)
# What the template promises on top (AWS's advice for SQS-triggered functions).
VISIBILITY_FACTOR = 6  # visibility timeout >= 6 x executor timeout
LAMBDA_MAX_TIMEOUT = 900
SQS_MAX_VISIBILITY = 43200

QUEUE = "StepQueue"
DLQ = "DeadLetterQueue"
SCHEDULER = "SchedulerFunction"
EXECUTOR = "ExecutorFunction"
BINARIES = {SCHEDULER: "scheduler", EXECUTOR: "executor"}

# Every variable both functions must get from the template.
REQUIRED_ENV = (
    "RARA_LEASE_SECONDS",
    "RARA_HEARTBEAT_SECONDS",
    "RARA_VISIBILITY_TIMEOUT_SECONDS",
    "RARA_FUNCTION_TIMEOUT_SECONDS",
    "RARA_MAX_RECEIVE_COUNT",
    "RARA_MAX_ATTEMPTS_LIMIT",
    "RARA_QUEUE_URL",
    "RARA_DLQ_URL",
    "RARA_REMOTE_EXECUTORS",
    "RARA_SCHEDULER_BUDGET_SECONDS",
    "RARA_DATABASE_SECRET_ARN",
    "RARA_REATTACH_INTERVAL_SECONDS",
    "RARA_RETENTION_DAYS",
)

# Exactly what each role may do on SQS.
SQS_GRANTS = {
    "SchedulerRole": {(QUEUE, "sqs:SendMessage")},
    "ExecutorRole": {
        (QUEUE, "sqs:ReceiveMessage"),
        (QUEUE, "sqs:DeleteMessage"),
        (QUEUE, "sqs:ChangeMessageVisibility"),
        (QUEUE, "sqs:GetQueueAttributes"),
        (QUEUE, "sqs:SendMessage"),  # a packed step moves into a message of its own
        (DLQ, "sqs:SendMessage"),
    },
    # `rara dlq list|purge|redrive` (an operator's managed policy, attached by the deployer).
    "OperatorPolicy": {
        (DLQ, "sqs:ReceiveMessage"),
        (DLQ, "sqs:DeleteMessage"),
        (DLQ, "sqs:ChangeMessageVisibility"),
        (QUEUE, "sqs:SendMessage"),
    },
}
FUNCTION_ROLES = {SCHEDULER: "SchedulerRole", EXECUTOR: "ExecutorRole"}

PSEUDO = {
    "AWS::Region": "us-east-1",
    "AWS::AccountId": "123456789012",
    "AWS::Partition": "aws",
    "AWS::StackName": "rara",
    "AWS::StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/rara/x",
    "AWS::URLSuffix": "amazonaws.com",
}

# Values used for parameters without a default, and for the "everything on" scenario.
REQUIRED_PARAMS = {
    "DatabaseSecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:rara/database-AbCdEf",
}
FULL_OPTIONS = {
    "SubnetIds": "subnet-0123456789abcdef0,subnet-0123456789abcdef1",
    "SecurityGroupIds": "sg-0123456789abcdef0",
    "DatabaseSecretKmsKeyArn": "arn:aws:kms:us-east-1:123456789012:key/0c7a6f2e-1111-2222-3333-444455556666",
    "RdsProxyDbClusterIdentifier": "rara-db",
    "AlarmTopicArn": "arn:aws:sns:us-east-1:123456789012:rara-alarms",
    "RemoteExecutors": "https://worker.example.com:443",
    "EnableApi": "true",
    "SecretsPrefix": "rara/workflows/",
    "RemoteCredentialsSecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:rara/remote-AbCdEf",
}


# ------------------------------------------------------------------ loading


def load_template(path: Path | str = TEMPLATE) -> dict:
    """The template as plain dicts and lists, short-form tags (!Ref ...) in long form."""
    from cfnlint.decode import cfn_yaml

    return json.loads(json.dumps(cfn_yaml.load(str(path))))


def samconfig_overrides(path: Path | str = SAMCONFIG) -> dict[str, dict[str, str]]:
    """{env: {parameter: value}} of every `deploy` section's parameter_overrides, parsed
    the way the SAM CLI parses them."""
    import tomllib

    with open(path, "rb") as f:
        config = tomllib.load(f)
    out = {}
    for env, sections in config.items():
        if not isinstance(sections, dict):
            continue
        raw = sections.get("deploy", {}).get("parameters", {}).get("parameter_overrides")
        if raw is None:
            continue
        out[env] = _parse_overrides(raw)
    return out


def _parse_overrides(raw: Any) -> dict[str, str]:
    try:
        from samcli.cli.types import CfnParameterOverridesType

        return CfnParameterOverridesType().convert(raw, None, None)
    except ImportError:  # pragma: no cover - samcli is in .venv-tools
        items = raw if isinstance(raw, list) else str(raw).split()
        return dict(str(i).split("=", 1) for i in items)


# ------------------------------------------------------------------ evaluation


@dataclass(frozen=True)
class Sym:
    """A value only known at deploy time: a resource's Ref or GetAtt."""

    kind: str  # "Ref" or "GetAtt"
    resource: str
    attr: str = ""

    def __str__(self) -> str:
        return f"${{{self.resource}}}" if self.kind == "Ref" else f"${{{self.resource}.{self.attr}}}"

    def __repr__(self) -> str:
        return str(self)


NOVALUE = object()

# The API's console key secret (the only secret besides the database's a role may read).
CONSOLE_KEY_SECRET = Sym("Ref", "ConsoleKeySecret")


class EvalError(Exception):
    pass


class Evaluator:
    """Resolves intrinsic functions for one set of parameter values."""

    def __init__(self, template: dict, params: dict[str, str]):
        self.t = template
        self.declared = template.get("Parameters", {})
        self.params: dict[str, Any] = {}
        for name, decl in self.declared.items():
            if name in params:
                value = params[name]
            elif "Default" in decl:
                value = decl["Default"]
            else:
                raise EvalError(f"parameter {name} has no value and no default")
            if decl.get("Type") == "CommaDelimitedList" or str(decl.get("Type", "")).startswith("List<"):
                value = [v.strip() for v in str(value).split(",")]
            else:
                value = str(value)
            self.params[name] = value
        self.resources = template.get("Resources", {})
        self._conditions: dict[str, bool] = {}

    def condition(self, name: str) -> bool:
        if name not in self._conditions:
            decl = self.t.get("Conditions", {}).get(name)
            if decl is None:
                raise EvalError(f"unknown condition {name}")
            self._conditions[name] = bool(self.eval(decl))
        return self._conditions[name]

    def active(self, resource: dict) -> bool:
        cond = resource.get("Condition")
        return cond is None or self.condition(cond)

    def eval(self, node: Any) -> Any:
        if isinstance(node, list):
            return [v for v in (self.eval(i) for i in node) if v is not NOVALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            (key, arg), = node.items()
            fn = _INTRINSICS.get(key)
            if fn is not None:
                return fn(self, arg)
        return {k: v for k, v in ((k, self.eval(v)) for k, v in node.items()) if v is not NOVALUE}

    # intrinsic functions
    def _ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return NOVALUE
        if name in PSEUDO:
            return PSEUDO[name]
        if name in self.params:
            return self.params[name]
        if name in self.resources:
            return Sym("Ref", name)
        raise EvalError(f"Ref to unknown {name}")

    def _getatt(self, arg: Any) -> Sym:
        if isinstance(arg, str):
            resource, attr = arg.split(".", 1)
        else:
            resource, attr = arg
        if resource not in self.resources:
            raise EvalError(f"GetAtt of unknown resource {resource}")
        return Sym("GetAtt", resource, self.eval(attr))

    def _findinmap(self, arg: list) -> Any:
        name, top, second = (self.eval(a) for a in arg[:3])
        try:
            return self.t["Mappings"][name][str(top)][str(second)]
        except KeyError as e:
            raise EvalError(f"FindInMap {name}/{top}/{second}: no such key {e}") from None

    def _if(self, arg: list) -> Any:
        cond, yes, no = arg
        return self.eval(yes if self.condition(cond) else no)

    def _sub(self, arg: Any) -> str:
        text, local = (arg, {}) if isinstance(arg, str) else (arg[0], self.eval(arg[1]))

        def repl(m: re.Match) -> str:
            var = m.group(1)
            if var.startswith("!"):
                return "${" + var[1:] + "}"
            if var in local:
                return str(local[var])
            if "." in var:
                return str(self._getatt(var))
            value = self._ref(var)
            return ",".join(value) if isinstance(value, list) else str(value)

        return re.sub(r"\$\{([^}]+)\}", repl, text)

    def _join(self, arg: list) -> str:
        sep, items = arg
        return str(sep).join(str(i) for i in self.eval(items))

    def _select(self, arg: list) -> Any:
        index, items = self.eval(arg[0]), self.eval(arg[1])
        return items[int(index)]

    def _equals(self, arg: list) -> bool:
        a, b = (self.eval(x) for x in arg)
        return str(a) == str(b)


_INTRINSICS: dict[str, Callable[[Evaluator, Any], Any]] = {
    "Ref": Evaluator._ref,
    "Fn::GetAtt": Evaluator._getatt,
    "Fn::FindInMap": Evaluator._findinmap,
    "Fn::If": Evaluator._if,
    "Fn::Sub": Evaluator._sub,
    "Fn::Join": Evaluator._join,
    "Fn::Select": Evaluator._select,
    "Fn::Equals": Evaluator._equals,
    "Fn::Not": lambda e, a: not e.eval(a[0]),
    "Fn::And": lambda e, a: all(e.eval(x) for x in a),
    "Fn::Or": lambda e, a: any(e.eval(x) for x in a),
    "Condition": lambda e, a: e.condition(a),
}


@dataclass
class Resolved:
    """The template evaluated for one scenario: resources with intrinsics resolved, SAM
    Globals merged into the functions, inactive (Condition false) resources left out."""

    name: str
    params: dict[str, Any]
    resources: dict[str, dict]
    outputs: dict[str, Any]

    def props(self, logical_id: str) -> dict:
        return self.resources.get(logical_id, {}).get("Properties", {})

    def of_type(self, type_: str) -> dict[str, dict]:
        return {k: v for k, v in self.resources.items() if v.get("Type") == type_}


def resolve(template: dict, params: dict[str, str], name: str = "") -> Resolved:
    ev = Evaluator(template, params)
    globals_fn = template.get("Globals", {}).get("Function", {})
    resources = {}
    for logical_id, res in template.get("Resources", {}).items():
        if not ev.active(res):
            continue
        res = copy.deepcopy(res)
        if res.get("Type") == "AWS::Serverless::Function":
            res["Properties"] = _merge_globals(globals_fn, res.get("Properties", {}))
        resources[logical_id] = ev.eval(res)
    outputs = {}
    for key, out in template.get("Outputs", {}).items():
        if ev.active(out):
            outputs[key] = ev.eval(out.get("Value"))
    return Resolved(name, ev.params, resources, outputs)


def _merge_globals(globals_fn: dict, props: dict) -> dict:
    """SAM's rule: maps (Environment.Variables, Tags) merge with the function winning,
    everything else the function's value replaces the global one."""
    merged = copy.deepcopy(globals_fn)
    for key, value in props.items():
        if key in merged and isinstance(merged[key], dict) and isinstance(value, dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _deep_merge(a: dict, b: dict) -> dict:
    out = copy.deepcopy(a)
    for k, v in b.items():
        if k in out and isinstance(out[k], dict) and isinstance(v, dict) and not _is_intrinsic(v):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _is_intrinsic(node: dict) -> bool:
    return len(node) == 1 and (next(iter(node)).startswith("Fn::") or next(iter(node)) in ("Ref", "Condition"))


def scenarios(template: dict, extra: dict[str, dict[str, str]] | None = None) -> Iterable[tuple[str, dict[str, str]]]:
    """Every TimingProfile x MaxAttemptsLimit, each without and with every option on
    (VPC, KMS key, RDS Proxy, alarm topic, remote executors), plus `extra` named sets."""
    declared = template.get("Parameters", {})
    timing = declared.get("TimingProfile", {}).get("AllowedValues", [None])
    attempts = declared.get("MaxAttemptsLimit", {}).get("AllowedValues", [None])
    for t, a, full in itertools.product(timing, attempts, (False, True)):
        params = dict(REQUIRED_PARAMS)
        if t is not None:
            params["TimingProfile"] = t
        if a is not None:
            params["MaxAttemptsLimit"] = a
        if full:
            params.update(FULL_OPTIONS)
        yield f"TimingProfile={t} MaxAttemptsLimit={a}{' +options' if full else ''}", params
    for name, params in (extra or {}).items():
        yield name, {**REQUIRED_PARAMS, **params}


# ------------------------------------------------------------------ checks on the source


def check_parameter_values(template: dict, params: dict[str, str], where: str) -> list[str]:
    """Overrides (e.g. samconfig.toml's) name declared parameters and respect their
    AllowedValues / MinValue / MaxValue / AllowedPattern."""
    problems = []
    declared = template.get("Parameters", {})
    for name, value in params.items():
        decl = declared.get(name)
        if decl is None:
            problems.append(f"{where}: {name} is not a parameter of the template")
            continue
        allowed = decl.get("AllowedValues")
        if allowed is not None and str(value) not in [str(a) for a in allowed]:
            problems.append(f"{where}: {name}={value} is not one of {allowed}")
        if decl.get("Type") == "Number":
            try:
                number = float(value)
            except ValueError:
                problems.append(f"{where}: {name}={value} is not a number")
                continue
            if "MinValue" in decl and number < float(decl["MinValue"]):
                problems.append(f"{where}: {name}={value} is below MinValue {decl['MinValue']}")
            if "MaxValue" in decl and number > float(decl["MaxValue"]):
                problems.append(f"{where}: {name}={value} is above MaxValue {decl['MaxValue']}")
        pattern = decl.get("AllowedPattern")
        if pattern and not re.fullmatch(pattern, str(value)):
            problems.append(f"{where}: {name}={value} does not match {pattern}")
    for name, decl in declared.items():
        if "Default" not in decl and name not in params:
            problems.append(f"{where}: {name} has no default and is not given")
    return problems


def check_batching_window(template: dict) -> list[str]:
    """A message must reach a claim before its lease ends: the batching window can never
    be more than a third of the shortest lease any profile gives."""
    declared = template.get("Parameters", {})
    window = declared.get("MaximumBatchingWindowInSeconds", {})
    if "MaxValue" not in window:
        return ["MaximumBatchingWindowInSeconds has no MaxValue (it must stay under the lease)"]
    leases = [row["LeaseSeconds"] for row in template.get("Mappings", {}).get("Timing", {}).values()]
    if leases and float(window["MaxValue"]) * 3 > min(float(x) for x in leases):
        return [
            f"MaximumBatchingWindowInSeconds MaxValue {window['MaxValue']} exceeds a third of the shortest "
            f"lease ({min(leases)} s)"
        ]
    return []


# ------------------------------------------------------------------ checks on a scenario


def _int(value: Any, what: str, problems: list[str]) -> int | None:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        problems.append(f"{what} is not a whole number: {value!r}")
        return None


def check_functions(r: Resolved) -> list[str]:
    """Both functions: provided.al2023 on arm64, bootstrap handler, built by cargo-lambda
    from their own binary."""
    problems = []
    functions = r.of_type("AWS::Serverless::Function")
    for logical_id, binary in BINARIES.items():
        fn = functions.get(logical_id)
        if fn is None:
            problems.append(f"{logical_id} is missing")
            continue
        p = fn.get("Properties", {})
        if p.get("Runtime") != "provided.al2023":
            problems.append(f"{logical_id}: Runtime is {p.get('Runtime')!r}, not 'provided.al2023'")
        if p.get("Architectures") != ["arm64"]:
            problems.append(f"{logical_id}: Architectures is {p.get('Architectures')!r}, not ['arm64']")
        if p.get("Handler") != "bootstrap":
            problems.append(f"{logical_id}: Handler is {p.get('Handler')!r}, not 'bootstrap'")
        meta = fn.get("Metadata", {})
        if meta.get("BuildMethod") != "rust-cargolambda":
            problems.append(f"{logical_id}: Metadata.BuildMethod is {meta.get('BuildMethod')!r}")
        if meta.get("BuildProperties", {}).get("Binary") != binary:
            problems.append(f"{logical_id}: Metadata.BuildProperties.Binary is not {binary!r}")
        if p.get("Role") != Sym("GetAtt", FUNCTION_ROLES[logical_id], "Arn"):
            problems.append(f"{logical_id}: Role is not {FUNCTION_ROLES[logical_id]}.Arn")
    return problems


def _executor_sqs_events(r: Resolved) -> list[tuple[str, dict]]:
    events = r.props(EXECUTOR).get("Events", {})
    return [(k, v.get("Properties", {})) for k, v in events.items() if v.get("Type") == "SQS"]


def check_event_source(r: Resolved) -> list[str]:
    """The executor reads the step queue with partial batch responses on."""
    problems = []
    events = _executor_sqs_events(r)
    if len(events) != 1:
        return [f"{EXECUTOR} must have exactly one SQS event, has {len(events)}"]
    name, p = events[0]
    if p.get("Queue") != Sym("GetAtt", QUEUE, "Arn"):
        problems.append(f"{EXECUTOR}.Events.{name}.Queue is not {QUEUE}.Arn")
    if p.get("FunctionResponseTypes") != ["ReportBatchItemFailures"]:
        problems.append(
            f"{EXECUTOR}.Events.{name}.FunctionResponseTypes is {p.get('FunctionResponseTypes')!r}, "
            "not ['ReportBatchItemFailures']: without it a batch with one failure is retried whole"
        )
    for key in ("BatchSize", "MaximumBatchingWindowInSeconds"):
        if key not in p:
            problems.append(f"{EXECUTOR}.Events.{name}.{key} is not set")
    if "MaximumConcurrency" not in p.get("ScalingConfig", {}):
        problems.append(f"{EXECUTOR}.Events.{name}.ScalingConfig.MaximumConcurrency is not set")
    if p.get("Enabled") is False or str(p.get("Enabled")).lower() == "false":
        problems.append(f"{EXECUTOR}.Events.{name} is disabled")
    return problems


def check_alignment(r: Resolved) -> list[str]:
    """The relations of DESIGN.md between the queue, the functions and the lease."""
    problems: list[str] = []
    queue = r.props(QUEUE)
    executor = r.props(EXECUTOR)
    scheduler = r.props(SCHEDULER)
    env = executor.get("Environment", {}).get("Variables", {})
    visibility = _int(queue.get("VisibilityTimeout"), f"{QUEUE}.VisibilityTimeout", problems)
    timeout = _int(executor.get("Timeout"), f"{EXECUTOR}.Timeout", problems)
    receive = _int(queue.get("RedrivePolicy", {}).get("maxReceiveCount"), f"{QUEUE} maxReceiveCount", problems)
    limit = _int(r.params.get("MaxAttemptsLimit"), "MaxAttemptsLimit", problems)
    lease = _int(env.get("RARA_LEASE_SECONDS"), "RARA_LEASE_SECONDS", problems)
    heartbeat = _int(env.get("RARA_HEARTBEAT_SECONDS"), "RARA_HEARTBEAT_SECONDS", problems)
    s_timeout = _int(scheduler.get("Timeout"), f"{SCHEDULER}.Timeout", problems)
    budget = _int(
        scheduler.get("Environment", {}).get("Variables", {}).get("RARA_SCHEDULER_BUDGET_SECONDS"),
        "RARA_SCHEDULER_BUDGET_SECONDS",
        problems,
    )
    if problems:
        return problems
    assert None not in (visibility, timeout, receive, limit, lease, heartbeat, s_timeout, budget)
    if visibility < VISIBILITY_FACTOR * timeout:
        problems.append(
            f"visibility timeout {visibility} s < {VISIBILITY_FACTOR} x executor timeout {timeout} s"
        )
    if timeout > LAMBDA_MAX_TIMEOUT or s_timeout > LAMBDA_MAX_TIMEOUT:
        problems.append(f"a function timeout exceeds Lambda's {LAMBDA_MAX_TIMEOUT} s")
    if visibility > SQS_MAX_VISIBILITY:
        problems.append(f"visibility timeout {visibility} s exceeds SQS's {SQS_MAX_VISIBILITY} s")
    if receive < limit + RECEIVE_COUNT_MARGIN:
        problems.append(
            f"maxReceiveCount {receive} < max attempts limit {limit} + {RECEIVE_COUNT_MARGIN}: retries would "
            "push healthy steps into the DLQ"
        )
    if heartbeat * HEARTBEAT_DIVISOR > lease:
        problems.append(f"heartbeat {heartbeat} s > lease {lease} s / {HEARTBEAT_DIVISOR}")
    if heartbeat * HEARTBEAT_DIVISOR > visibility:
        problems.append(f"heartbeat {heartbeat} s > visibility timeout {visibility} s / {HEARTBEAT_DIVISOR}")
    if budget + DEADLINE_MARGIN_SECONDS >= s_timeout:
        problems.append(
            f"scheduler budget {budget} s + {DEADLINE_MARGIN_SECONDS} s margin does not fit its timeout {s_timeout} s"
        )
    if DEADLINE_MARGIN_SECONDS >= timeout:
        problems.append(f"executor timeout {timeout} s leaves no room for the {DEADLINE_MARGIN_SECONDS} s margin")
    dlq = r.props(DLQ)
    if int(dlq.get("MessageRetentionPeriod", 345600)) < int(queue.get("MessageRetentionPeriod", 345600)):
        problems.append("the DLQ keeps messages for less time than the step queue")
    if queue.get("RedrivePolicy", {}).get("deadLetterTargetArn") != Sym("GetAtt", DLQ, "Arn"):
        problems.append(f"{QUEUE}'s redrive policy does not target {DLQ}.Arn")
    return problems


def check_environment(r: Resolved) -> list[str]:
    """Both functions get every RARA_* setting, equal to the queue's actual settings."""
    problems = []
    queue = r.props(QUEUE)
    executor = r.props(EXECUTOR)
    expected = {
        "RARA_VISIBILITY_TIMEOUT_SECONDS": queue.get("VisibilityTimeout"),
        "RARA_MAX_RECEIVE_COUNT": queue.get("RedrivePolicy", {}).get("maxReceiveCount"),
        "RARA_FUNCTION_TIMEOUT_SECONDS": executor.get("Timeout"),
        "RARA_MAX_ATTEMPTS_LIMIT": r.params.get("MaxAttemptsLimit"),
        "RARA_QUEUE_URL": Sym("Ref", QUEUE),
        "RARA_DLQ_URL": Sym("Ref", DLQ),
    }
    envs = {}
    for fn in (SCHEDULER, EXECUTOR):
        env = r.props(fn).get("Environment", {}).get("Variables", {})
        envs[fn] = env
        for var in REQUIRED_ENV:
            if var not in env:
                problems.append(f"{fn}: {var} is not set")
        # Each function's own database secret, else the shared one.
        own = {**expected, "RARA_DATABASE_SECRET_ARN": database_secret(r, FUNCTION_ROLES[fn])}
        for var, want in own.items():
            if var in env and _norm(env[var]) != _norm(want):
                problems.append(f"{fn}: {var}={env[var]!r} but the stack has {want!r}")
    for var in sorted(set(envs[SCHEDULER]) & set(envs[EXECUTOR]) - {"RARA_DATABASE_SECRET_ARN"}):
        if var.startswith("RARA_") and var != "RARA_WORKER_ID" and _norm(envs[SCHEDULER][var]) != _norm(envs[EXECUTOR][var]):
            problems.append(f"{var} differs between the scheduler and the executor")
    return problems


def _norm(value: Any) -> Any:
    return value if isinstance(value, Sym) else str(value)


# A name ending in _SECRET_ARN names where a secret is, not the secret.
SECRET_NAME = re.compile(
    r"^(?!\w*_SECRET_ARN$)\w*?(?:PASSWORD|PASSWD|SECRET(?!S_BACKEND$|S_PREFIX$)|TOKEN|CREDENTIAL|_DSN$|PGPASS)|^DATABASE_URL$",
    re.I,
)
URL_WITH_PASSWORD = re.compile(r"^[a-z][a-z0-9+.-]*://[^/:@\s]+:[^/@\s]+@", re.I)


def check_no_plain_secrets(r: Resolved) -> list[str]:
    """Credentials come from Secrets Manager at init, never from an environment variable."""
    problems = []
    for fn in r.of_type("AWS::Serverless::Function"):
        env = r.props(fn).get("Environment", {}).get("Variables", {})
        for var, value in env.items():
            if SECRET_NAME.search(var):
                problems.append(f"{fn}: environment variable {var} looks like a plain secret")
            if isinstance(value, str) and (URL_WITH_PASSWORD.search(value) or "password" in value.lower()):
                problems.append(f"{fn}: {var} holds a credential")
    return problems


def _statements(r: Resolved) -> Iterable[tuple[str, dict]]:
    """Every IAM statement anywhere in the resolved template (roles, SAM Policies, ...)."""

    def walk(node: Any, where: str) -> Iterable[tuple[str, dict]]:
        if isinstance(node, dict):
            if "Effect" in node and ("Action" in node or "NotAction" in node):
                yield where, node
                return
            for k, v in node.items():
                yield from walk(v, f"{where}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from walk(v, f"{where}[{i}]")

    for logical_id, res in r.resources.items():
        yield from walk(res, logical_id)


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def _is_wildcard(resource: Any) -> bool:
    return isinstance(resource, str) and ("*" in resource or "?" in resource)


# Each function's role, and the parameter of the database secret that function alone reads.
FUNCTION_ROLES = {SCHEDULER: "SchedulerRole", EXECUTOR: "ExecutorRole", "ApiFunction": "ApiRole"}
OWN_DATABASE_SECRETS = {
    "SchedulerRole": "SchedulerDatabaseSecretArn",
    "ExecutorRole": "ExecutorDatabaseSecretArn",
    "ApiRole": "ApiDatabaseSecretArn",
}


def database_secret(r: Resolved, role: str) -> Any:
    """The database secret `role`'s function reads: its own if given, else DatabaseSecretArn."""
    return r.params.get(OWN_DATABASE_SECRETS[role]) or r.params.get("DatabaseSecretArn")


def database_secrets(r: Resolved, role: str) -> set:
    """The database secrets `role` may read: a function's role its own alone; the RDS Proxy's
    role every one the proxy authenticates."""
    if role in OWN_DATABASE_SECRETS:
        return {database_secret(r, role)}
    own = {r.params.get(p) for p in OWN_DATABASE_SECRETS.values()} - {None, ""}
    return {r.params.get("DatabaseSecretArn")} | own


def check_iam(r: Resolved) -> list[str]:
    """No wildcard resource (or action) for SQS and Secrets Manager; each role gets
    exactly its queue permissions; the secret is the one given."""
    problems = []
    granted: dict[str, set[tuple[str, str]]] = {}
    secret = r.params.get("DatabaseSecretArn")
    # Workflow secrets: the executor alone, GetSecretValue alone, on `secret:<prefix>*` alone.
    prefix = r.params.get("SecretsPrefix") or ""
    region, account = PSEUDO["AWS::Region"], PSEUDO["AWS::AccountId"]
    workflow_secrets = f"arn:aws:secretsmanager:{region}:{account}:secret:{prefix}*" if prefix else None
    if prefix and isinstance(secret, str) and secret.split(":secret:", 1)[-1].startswith(prefix):
        problems.append(f"SecretsPrefix {prefix!r} covers the DatabaseSecretArn")
    workflow_grants = 0
    for where, st in _statements(r):
        if st.get("Effect") != "Allow":
            continue
        if "NotAction" in st or "NotResource" in st:
            problems.append(f"{where}: NotAction/NotResource grants are not allowed")
            continue
        actions = [str(a) for a in _as_list(st.get("Action"))]
        resources = _as_list(st.get("Resource"))
        sensitive = [a for a in actions if a == "*" or a.lower().startswith(("sqs:", "secretsmanager:"))]
        if not sensitive:
            continue
        for a in sensitive:
            if "*" in a or "?" in a:
                problems.append(f"{where}: wildcard action {a}")
        if workflow_secrets and resources == [workflow_secrets]:
            if where.startswith("ExecutorRole.") and st.get("Sid") == "WorkflowSecrets" and actions == [
                "secretsmanager:GetSecretValue"
            ]:
                workflow_grants += 1
                continue
            problems.append(f"{where}: {', '.join(sensitive)} on the workflow secrets: only ExecutorRole's GetSecretValue")
            continue
        for res in resources:
            if _is_wildcard(res):
                problems.append(f"{where}: {', '.join(sensitive)} on wildcard resource {res!r}")
            elif any(a.lower().startswith("secretsmanager:") for a in sensitive) and res not in database_secrets(
                r, where.split(".", 1)[0]
            ):
                if res == CONSOLE_KEY_SECRET and where.startswith("ApiRole.") and actions == ["secretsmanager:GetSecretValue"]:
                    continue  # the API reads its console key (test_api_template.py pins the grant)
                remote = r.params.get("RemoteCredentialsSecretArn")
                if (
                    remote
                    and res == remote
                    and where.startswith(("ExecutorRole.", "ApiRole."))
                    and actions == ["secretsmanager:GetSecretValue"]
                ):
                    continue  # the executor and the API's cancel present the remote credential, no one else
                problems.append(f"{where}: secretsmanager on {res!r}, not its database secret")
        role = where.split(".", 1)[0]
        for a in sensitive:
            if a.lower().startswith("sqs:"):
                for res in resources:
                    target = res.resource if isinstance(res, Sym) and res.attr == "Arn" else str(res)
                    granted.setdefault(role, set()).add((target, a))
    if workflow_grants != (1 if prefix else 0):
        problems.append(f"ExecutorRole: {workflow_grants} WorkflowSecrets grants for SecretsPrefix {prefix!r}")
    for role, want in SQS_GRANTS.items():
        have = granted.get(role, set())
        if have != want:
            missing, extra = sorted(want - have), sorted(have - want)
            problems.append(f"{role}: SQS grants differ (missing {missing}, extra {extra})")
    for role, have in granted.items():
        if role not in SQS_GRANTS:
            problems.append(f"{role}: unexpected SQS grants {sorted(have)}")
    return problems


def check_alarms(r: Resolved) -> list[str]:
    """Alarms on DLQ depth, the age of the oldest step message and both functions' errors."""
    problems = []
    alarms = list(r.of_type("AWS::CloudWatch::Alarm").values())

    def find(namespace: str, metric: str, dim: str, value: Any) -> list[dict]:
        out = []
        for a in alarms:
            p = a.get("Properties", {})
            dims = {d.get("Name"): d.get("Value") for d in p.get("Dimensions", [])}
            if p.get("Namespace") == namespace and p.get("MetricName") == metric and dims.get(dim) == value:
                out.append(p)
        return out

    dlq = find("AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", Sym("GetAtt", DLQ, "QueueName"))
    if not any(
        str(p.get("Threshold")) in ("0", "0.0") and p.get("ComparisonOperator") == "GreaterThanThreshold" for p in dlq
    ):
        problems.append("no alarm on DLQ depth (ApproximateNumberOfMessagesVisible > 0)")
    if not find("AWS/SQS", "ApproximateAgeOfOldestMessage", "QueueName", Sym("GetAtt", QUEUE, "QueueName")):
        problems.append("no alarm on the age of the oldest message of the step queue")
    for fn in (SCHEDULER, EXECUTOR):
        if not find("AWS/Lambda", "Errors", "FunctionName", Sym("Ref", fn)):
            problems.append(f"no alarm on {fn} errors")
    return problems


def check_outputs(r: Resolved) -> list[str]:
    want = {
        "QueueUrl": Sym("Ref", QUEUE),
        "DeadLetterQueueUrl": Sym("Ref", DLQ),
        "SchedulerFunctionName": Sym("Ref", SCHEDULER),
        "ExecutorFunctionName": Sym("Ref", EXECUTOR),
    }
    return [f"output {k} is not {v}" for k, v in want.items() if r.outputs.get(k) != v]


SCENARIO_CHECKS = (
    check_functions,
    check_event_source,
    check_alignment,
    check_environment,
    check_no_plain_secrets,
    check_iam,
    check_alarms,
    check_outputs,
)


def all_problems(template: dict, extra: dict[str, dict[str, str]] | None = None) -> list[str]:
    """Every problem of the template over every scenario (deduplicated, scenario named)."""
    problems = list(check_batching_window(template))
    for env, params in (extra or {}).items():
        problems += check_parameter_values(template, params, f"samconfig [{env}]")
    seen = set()
    for name, params in scenarios(template, extra):
        try:
            r = resolve(template, params, name)
        except EvalError as e:
            problems.append(f"[{name}] cannot evaluate the template: {e}")
            continue
        for check in SCENARIO_CHECKS:
            for p in check(r):
                if p not in seen:
                    seen.add(p)
                    problems.append(f"[{name}] {p}")
    return problems


if __name__ == "__main__":
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else TEMPLATE
    found = all_problems(load_template(path), {f"samconfig:{k}": v for k, v in samconfig_overrides().items()})
    for p in found:
        print(p)
    print(f"{len(found)} problem(s)")
    sys.exit(1 if found else 0)
