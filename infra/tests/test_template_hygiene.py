"""Hygiene of infra/template.yaml: what holds data outlives the stack, the queues refuse
requests without TLS, and every parameter is documented in the deploy page with its real
default. Each check returns problems; the mutation tests prove each one can fail.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Callable

import pytest

import template_checks as tc
from template_checks import Resolved, Sym

DEPLOY_MD = tc.ROOT / "docs" / "src" / "operating" / "deploy.md"
# Where data lives: the DLQ holds the only copy of each poison message, the log groups the
# only record of what ran. (The step queue holds copies of Postgres rows: not listed.)
RETAINED = ("DeadLetterQueue", "SchedulerLogGroup", "ExecutorLogGroup")
QUEUES = (tc.QUEUE, tc.DLQ)


def check_retained(r: Resolved) -> list[str]:
    problems = []
    must = set(RETAINED) | set(r.of_type("AWS::Logs::LogGroup"))
    for name in sorted(must):
        res = r.resources.get(name)
        if res is None:
            problems.append(f"{name} is missing")
            continue
        for policy in ("DeletionPolicy", "UpdateReplacePolicy"):
            if res.get(policy) != "Retain":
                problems.append(f"{name}: {policy} is {res.get(policy)!r}, not 'Retain'")
    return problems


def _denies_plain_transport(st: dict) -> bool:
    condition = st.get("Condition", {}).get("Bool", {})
    return (
        st.get("Effect") == "Deny"
        and st.get("Principal") in ("*", {"AWS": "*"})
        and set(tc._as_list(st.get("Action"))) & {"sqs:*", "*"} != set()
        and str(condition.get("aws:SecureTransport")).lower() == "false"
    )


def check_secure_transport(r: Resolved) -> list[str]:
    """Each queue has a queue policy that denies every request made without TLS."""
    covered: set[str] = set()
    for res in r.of_type("AWS::SQS::QueuePolicy").values():
        p = res.get("Properties", {})
        queues = {q.resource for q in p.get("Queues", []) if isinstance(q, Sym) and q.kind == "Ref"}
        for st in tc._as_list(p.get("PolicyDocument", {}).get("Statement", [])):
            if _denies_plain_transport(st):
                arns = {x.resource for x in tc._as_list(st.get("Resource")) if isinstance(x, Sym) and x.attr == "Arn"}
                covered |= queues & arns
    return [f"{q}: no queue policy denies aws:SecureTransport false" for q in QUEUES if q not in covered]


ROW = re.compile(r"^\|\s*`([A-Za-z0-9]+)`\s*\|\s*([^|]*?)\s*\|\s*(.+?)\s*\|\s*$")


MAIN_HEADING = "## Parameters"
SERVICE_HEADING = "### Parameters of the executor service stack"


def documented_parameters(markdown: str, heading: str = MAIN_HEADING) -> dict[str, str]:
    """{name: default as written} of the table under `heading` (up to the next heading of
    the same or a higher level)."""
    lines = markdown.splitlines()
    if heading not in lines:
        return {}
    level = heading.split(" ", 1)[0]
    rows = {}
    for line in lines[lines.index(heading) + 1 :]:
        if line.startswith("#") and len(line.split(" ", 1)[0]) <= len(level):
            break
        m = ROW.match(line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


def _shown(default: Any) -> str:
    """A default as the table writes it: `value`, (empty), or (required) when there is none."""
    if default is None:
        return "(required)"
    return "(empty)" if str(default) == "" else f"`{default}`"


def check_parameters_documented(template: dict, markdown: str, heading: str = MAIN_HEADING) -> list[str]:
    problems = []
    rows = documented_parameters(markdown, heading)
    declared = template.get("Parameters", {})
    for name, decl in declared.items():
        if name not in rows:
            problems.append(f"parameter {name} is not in the deploy page's table ({heading})")
        elif rows[name] != _shown(decl.get("Default")):
            problems.append(f"parameter {name}: the deploy page says default {rows[name]}, the template {_shown(decl.get('Default'))}")
    for name in rows:
        if name not in declared:
            problems.append(f"the deploy page documents {name}, which the template does not declare")
    return problems


def all_problems(template: dict, markdown: str) -> list[str]:
    problems = check_parameters_documented(template, markdown)
    seen = set()
    for name, params in tc.scenarios(template):
        r = tc.resolve(template, params, name)
        for p in check_retained(r) + check_secure_transport(r):
            if p not in seen:
                seen.add(p)
                problems.append(f"[{name}] {p}")
    return problems


@pytest.fixture(scope="module")
def template() -> dict:
    return tc.load_template()


@pytest.fixture(scope="module")
def markdown() -> str:
    return DEPLOY_MD.read_text()


def test_the_template_is_hygienic(template, markdown):
    assert all_problems(template, markdown) == []


def test_the_parameters_table_is_found(template, markdown):
    rows = documented_parameters(markdown)
    assert set(rows) == set(template["Parameters"])
    assert rows["TimingProfile"] == "`standard`" and rows["DatabaseSecretArn"] == "(required)"


def test_the_executor_service_parameters_are_documented(markdown):
    import executor_service_checks as es

    service = es.load_template()
    assert check_parameters_documented(service, markdown, SERVICE_HEADING) == []
    assert set(documented_parameters(markdown, SERVICE_HEADING)) == set(service["Parameters"])
    broken = copy.deepcopy(service)
    broken["Parameters"]["MinTasks"]["Default"] = 1
    assert check_parameters_documented(broken, markdown, SERVICE_HEADING) == [
        "parameter MinTasks: the deploy page says default `2`, the template `1`"
    ]


def _policy(t: dict) -> dict:
    return t["Resources"]["QueuesTlsOnly"]["Properties"]


MUTATIONS: dict[str, tuple[Callable[[dict], None], str]] = {
    "DLQ deleted with the stack": (
        lambda t: t["Resources"]["DeadLetterQueue"].pop("DeletionPolicy"),
        "DeadLetterQueue: DeletionPolicy is None",
    ),
    "executor logs replaced without a copy": (
        lambda t: t["Resources"]["ExecutorLogGroup"].update(UpdateReplacePolicy="Delete"),
        "ExecutorLogGroup: UpdateReplacePolicy is 'Delete'",
    ),
    "a new log group not retained": (
        lambda t: t["Resources"].update(
            OtherLogGroup={"Type": "AWS::Logs::LogGroup", "Properties": {"RetentionInDays": 7}}
        ),
        "OtherLogGroup: DeletionPolicy is None",
    ),
    "no queue policy": (lambda t: t["Resources"].pop("QueuesTlsOnly"), "StepQueue: no queue policy denies"),
    "the DLQ left out": (
        lambda t: _policy(t).update(Queues=[{"Ref": "StepQueue"}]),
        "DeadLetterQueue: no queue policy denies",
    ),
    "the deny on the wrong condition": (
        lambda t: _policy(t)["PolicyDocument"]["Statement"][0]["Condition"]["Bool"].update({"aws:SecureTransport": "true"}),
        "StepQueue: no queue policy denies",
    ),
    "only sends denied": (
        lambda t: _policy(t)["PolicyDocument"]["Statement"][0].update(Action="sqs:SendMessage"),
        "DeadLetterQueue: no queue policy denies",
    ),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_a_broken_template_is_reported(template, markdown, name):
    mutate, expected = MUTATIONS[name]
    broken = copy.deepcopy(template)
    mutate(broken)
    problems = all_problems(broken, markdown)
    assert any(expected in p for p in problems), f"{name}: expected {expected!r} in\n" + "\n".join(problems)


def test_an_undocumented_or_misdocumented_parameter_is_reported(template, markdown):
    broken = copy.deepcopy(template)
    broken["Parameters"]["NewKnob"] = {"Type": "String", "Default": "x"}
    broken["Parameters"]["BatchSize"]["Default"] = 5
    problems = check_parameters_documented(broken, markdown)
    assert "parameter NewKnob is not in the deploy page's table (## Parameters)" in problems
    assert "parameter BatchSize: the deploy page says default `10`, the template `5`" in problems
    stale = markdown.replace("| `LogLevel` |", "| `LogLevelOld` |")
    assert "the deploy page documents LogLevelOld, which the template does not declare" in check_parameters_documented(template, stale)


# ------------------------------------------------------------------ the artifact bucket

BUCKET = "ArtifactsBucket"
# What each role may do in the bucket (docs/src/internals/artifacts.md): exactly these
# actions, only on `runs/*` (ListBucket on the bucket, with its prefix held to `runs/*`).
S3_GRANTS = {
    "SchedulerRole": {"s3:ListBucket", "s3:DeleteObject", "s3:PutObject", "s3:AbortMultipartUpload"},
    "ExecutorRole": {"s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload"},
    # A submission's large inputs are written (and deleted when no run was made) under
    # runs/*/inputs.json.
    "ApiRole": {"s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:DeleteObject"},
    "OperatorPolicy": {"s3:GetObject", "s3:DeleteObject", "s3:ListBucket", "s3:PutObject", "s3:AbortMultipartUpload"},
}


def check_artifacts_bucket(r: Resolved) -> list[str]:
    """The bucket is encrypted, private, retained, TLS-only, has its lifecycle safety nets, and
    each role gets exactly its S3 actions on `runs/*`."""
    problems = []
    bucket = r.resources.get(BUCKET)
    if bucket is None:
        return [f"{BUCKET} is missing"]
    p = bucket.get("Properties", {})
    for policy in ("DeletionPolicy", "UpdateReplacePolicy"):
        if bucket.get(policy) != "Retain":
            problems.append(f"{BUCKET}: {policy} is not Retain")
    sse = p.get("BucketEncryption", {}).get("ServerSideEncryptionConfiguration", [{}])[0]
    if sse.get("ServerSideEncryptionByDefault", {}).get("SSEAlgorithm") not in ("AES256", "aws:kms"):
        problems.append(f"{BUCKET}: no default encryption")
    block = p.get("PublicAccessBlockConfiguration", {})
    flags = ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets")
    if not all(block.get(k) is True for k in flags):
        problems.append(f"{BUCKET}: public access is not blocked")
    rules = p.get("LifecycleConfiguration", {}).get("Rules", [])
    if not any(rule.get("AbortIncompleteMultipartUpload") for rule in rules):
        problems.append(f"{BUCKET}: no rule aborts incomplete multipart uploads")
    if not any(rule.get("Prefix") == "runs/" and rule.get("ExpirationInDays") for rule in rules):
        problems.append(f"{BUCKET}: no expiration rule under runs/ as a safety net")
    tls = False
    for res in r.of_type("AWS::S3::BucketPolicy").values():
        doc = res.get("Properties", {}).get("PolicyDocument", {})
        for st in tc._as_list(doc.get("Statement", [])):
            condition = st.get("Condition", {}).get("Bool", {})
            tls |= (
                st.get("Effect") == "Deny"
                and st.get("Principal") == "*"
                and "s3:*" in tc._as_list(st.get("Action"))
                and str(condition.get("aws:SecureTransport")).lower() == "false"
            )
    if not tls:
        problems.append(f"{BUCKET}: no bucket policy denies aws:SecureTransport false")
    granted: dict[str, set[str]] = {}
    for where, st in tc._statements(r):
        actions = [str(a) for a in tc._as_list(st.get("Action"))]
        s3 = [a for a in actions if a.lower().startswith("s3:")]
        if st.get("Effect") != "Allow" or not s3:
            continue
        role = where.split(".", 1)[0]
        for res in tc._as_list(st.get("Resource")):
            bucket_arn = isinstance(res, Sym) and res.resource == BUCKET and res.attr == "Arn"
            prefix = st.get("Condition", {}).get("StringLike", {}).get("s3:prefix")
            if s3 == ["s3:ListBucket"] and bucket_arn and prefix == "runs/*":
                continue
            if not (isinstance(res, str) and res.endswith(("/runs/*", "/runs/*/inputs.json"))):
                problems.append(f"{where}: {', '.join(s3)} on {res!r}, not the bucket's runs/*")
        granted.setdefault(role, set()).update(s3)
    for role, want in S3_GRANTS.items():
        if role in r.resources and granted.get(role, set()) != want:
            problems.append(f"{role}: S3 grants {sorted(granted.get(role, set()))}, not {sorted(want)}")
    for role in set(granted) - set(S3_GRANTS):
        problems.append(f"{role}: unexpected S3 grants {sorted(granted[role])}")
    return problems


def test_the_artifact_bucket_is_private_encrypted_tls_only_and_each_role_gets_its_grants(template):
    for name, params in tc.scenarios(template):
        assert check_artifacts_bucket(tc.resolve(template, params, name)) == [], name


@pytest.mark.parametrize(
    "mutate, problem",
    [
        (lambda t: t["Resources"]["ArtifactsBucket"]["Properties"]["PublicAccessBlockConfiguration"].update(
            BlockPublicPolicy=False), "public access is not blocked"),
        (lambda t: t["Resources"].pop("ArtifactsBucketTlsOnly"), "denies aws:SecureTransport"),
        (lambda t: t["Resources"]["ArtifactsBucket"]["Properties"].pop("LifecycleConfiguration"),
         "incomplete multipart"),
        (lambda t: t["Resources"]["ExecutorRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"].append(
            {"Effect": "Allow", "Action": "s3:DeleteObject", "Resource": {"Fn::Sub": "${ArtifactsBucket.Arn}/*"}}),
         "not the bucket's runs/*"),
    ],
)
def test_a_broken_artifact_bucket_is_reported(template, mutate, problem):
    broken = copy.deepcopy(template)
    mutate(broken)
    name, params = next(iter(tc.scenarios(broken)))
    problems = check_artifacts_bucket(tc.resolve(broken, params, name))
    assert any(problem in p for p in problems), problems
