"""The optional HTTP API (EnableApi): a function URL with AWS_IAM auth, its own role with the
least it needs (its log group, the database secret and the console key secret, nothing on
SQS), nothing at all when off; the console key, the declaration that it runs behind IAM,
reserved concurrency, a retained log group and an alarm on the URL's 5xx (issue 42)."""

from __future__ import annotations

import copy

import pytest

import template_checks as tc

ON = {**tc.REQUIRED_PARAMS, "EnableApi": "true"}
API_RESOURCES = {"ApiFunction", "ApiRole", "ApiLogGroup", "ApiFunctionUrl", "ConsoleKeySecret", "ApiErrorsAlarm"}


@pytest.fixture(scope="module")
def template() -> dict:
    return tc.load_template()


def test_the_api_is_absent_unless_enabled(template):
    off = tc.resolve(template, dict(tc.REQUIRED_PARAMS))
    assert not API_RESOURCES & set(off.resources)
    assert API_RESOURCES <= set(tc.resolve(template, ON).resources)
    assert template["Parameters"]["EnableApi"]["Default"] == "false"


def test_the_api_function_is_built_like_the_others_behind_an_iam_function_url(template):
    r = tc.resolve(template, ON)
    fn = r.of_type("AWS::Serverless::Function")["ApiFunction"]
    p = fn["Properties"]
    assert (p["Runtime"], p["Architectures"], p["Handler"]) == ("provided.al2023", ["arm64"], "bootstrap")
    assert fn["Metadata"]["BuildProperties"]["Binary"] == "api"
    assert p["Role"] == tc.Sym("GetAtt", "ApiRole", "Arn")
    url = r.props("ApiFunctionUrl")
    assert url["AuthType"] == "AWS_IAM"
    assert set(tc.REQUIRED_ENV) <= set(p["Environment"]["Variables"])


def test_the_api_role_reads_the_secret_and_its_artifacts_and_writes_its_logs_and_nothing_else(template):
    r = tc.resolve(template, {**ON, **tc.FULL_OPTIONS})
    statements = [st for where, st in tc._statements(r) if where.startswith("ApiRole.Properties.Policies")]
    actions = sorted(a for st in statements for a in tc._as_list(st["Action"]))
    assert actions == [
        "kms:Decrypt",
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "s3:AbortMultipartUpload",  # a submission's large inputs (runs/*/inputs.json)
        "s3:DeleteObject",  # ... deleted when no run was made
        "s3:GetObject",  # GET /api/artifacts/{id}: it signs the presigned URLs
        "s3:PutObject",  # a submission's large inputs
        "secretsmanager:GetSecretValue",
        "secretsmanager:GetSecretValue",
        "secretsmanager:GetSecretValue",  # the remote credential: a cancel tells detached attempts
    ]
    assert tc.check_iam(r) == []


# ------------------------------------------------------------------ issue 42: the console deploys
# Each check below returns its problems; each test proves the template has none and that
# breaking the property in a copy makes the check report it (a check that cannot fail is no check).


def _with(template: dict, change) -> dict:
    broken = copy.deepcopy(template)
    change(broken)
    return broken


def check_console_key(r: tc.Resolved) -> list[str]:
    """One retained generated secret, passed to the function by ARN and readable by ApiRole alone."""
    problems = []
    res = r.resources.get("ConsoleKeySecret", {})
    if res.get("Type") != "AWS::SecretsManager::Secret":
        return ["no ConsoleKeySecret (AWS::SecretsManager::Secret)"]
    if (res.get("DeletionPolicy"), res.get("UpdateReplacePolicy")) != ("Retain", "Retain"):
        problems.append("ConsoleKeySecret is not retained on delete and replace")
    generated = res.get("Properties", {}).get("GenerateSecretString", {})
    if int(generated.get("PasswordLength", 32)) < MIN_KEY_CHARS or "SecretString" in res.get("Properties", {}):
        problems.append(f"ConsoleKeySecret is not generated with at least {MIN_KEY_CHARS} characters")
    env = r.props("ApiFunction").get("Environment", {}).get("Variables", {})
    if env.get("RARA_CONSOLE_KEY_SECRET_ARN") != tc.CONSOLE_KEY_SECRET:
        problems.append("ApiFunction's RARA_CONSOLE_KEY_SECRET_ARN is not the ConsoleKeySecret")
    readers = [
        (where, st)
        for where, st in tc._statements(r)
        if st.get("Effect") == "Allow" and tc.CONSOLE_KEY_SECRET in tc._as_list(st.get("Resource"))
    ]
    grants = [(where.split(".", 1)[0], tc._as_list(st["Action"])) for where, st in readers]
    if grants != [("ApiRole", ["secretsmanager:GetSecretValue"])]:
        problems.append(f"the console key secret is readable by {grants}, not ApiRole's GetSecretValue alone")
    return problems


def check_api_starts_closed(r: tc.Resolved) -> list[str]:
    """The function declares the IAM function URL it runs behind, and passes the operators."""
    env = r.props("ApiFunction").get("Environment", {}).get("Variables", {})
    problems = []
    if env.get("RARA_API_AUTH") != "iam" or r.props("ApiFunctionUrl").get("AuthType") != "AWS_IAM":
        problems.append("RARA_API_AUTH=iam without an AWS_IAM function URL, or the reverse")
    if env.get("RARA_API_OPERATORS") != r.params.get("ApiOperatorArns"):
        problems.append("RARA_API_OPERATORS is not the ApiOperatorArns parameter")
    return problems


def check_api_hygiene(r: tc.Resolved) -> list[str]:
    """Reserved concurrency from its parameter, a retained log group, an alarm on the URL's 5xx."""
    problems = []
    reserved = r.props("ApiFunction").get("ReservedConcurrentExecutions")
    if reserved is None or str(reserved) != str(r.params.get("ApiReservedConcurrency")):
        problems.append("ApiFunction's ReservedConcurrentExecutions is not ApiReservedConcurrency")
    log = r.resources.get("ApiLogGroup", {})
    if (log.get("DeletionPolicy"), log.get("UpdateReplacePolicy")) != ("Retain", "Retain"):
        problems.append("ApiLogGroup is not retained on delete and replace")
    alarms = [
        a["Properties"]
        for a in r.of_type("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("Namespace") == "AWS/Lambda"
        and a["Properties"].get("MetricName") == "Url5xxCount"
        and {"Name": "FunctionName", "Value": tc.Sym("Ref", "ApiFunction")} in a["Properties"].get("Dimensions", [])
    ]
    if not any(
        p.get("Statistic") == "Sum"
        and str(p.get("Threshold")) in ("0", "0.0")
        and p.get("ComparisonOperator") == "GreaterThanThreshold"
        for p in alarms
    ):
        problems.append("no alarm on ApiFunction's Url5xxCount (Sum > 0)")
    if r.props("ApiFunctionUrl").get("InvokeMode", "BUFFERED") != "BUFFERED":
        problems.append("the function URL streams, but the api function serves static pages (Updates::Static)")
    return problems


MIN_KEY_CHARS = 32  # functions/api MIN_KEY_CHARS
API_CHECKS = (check_console_key, check_api_starts_closed, check_api_hygiene)
SCENARIOS = {"minimal": ON, "full": {**ON, **tc.FULL_OPTIONS, "ApiOperatorArns": "arn:aws:iam::123456789012:role/ops"}}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("check", API_CHECKS, ids=lambda c: c.__name__)
def test_the_api_section_has_no_problems(template, check, scenario):
    assert check(tc.resolve(template, SCENARIOS[scenario])) == []


def test_the_api_section_passes_the_shared_iam_checks_with_its_second_secret(template):
    for params in SCENARIOS.values():
        assert tc.check_iam(tc.resolve(template, params)) == []


def _set(path: list, value=None, delete: bool = False):
    def change(t: dict) -> None:
        node = t
        for key in path[:-1]:
            node = node[key]
        if delete:
            del node[path[-1]]
        else:
            node[path[-1]] = value

    return change


def _api_statements(t: dict) -> list:
    return t["Resources"]["ApiRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]


def _grant_console_key_to_the_executor(t: dict) -> None:
    t["Resources"]["ExecutorRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"].append(
        {"Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": {"Ref": "ConsoleKeySecret"}}
    )


def _drop_console_key_grant(t: dict) -> None:
    statements = _api_statements(t)
    statements[:] = [s for s in statements if not (isinstance(s, dict) and s.get("Sid") == "ConsoleKeySecret")]


def _widen_console_key_grant(t: dict) -> None:
    for s in _api_statements(t):
        if isinstance(s, dict) and s.get("Sid") == "ConsoleKeySecret":
            s["Action"] = ["secretsmanager:GetSecretValue", "secretsmanager:PutSecretValue"]


FN = ["Resources", "ApiFunction", "Properties"]
ENV = FN + ["Environment", "Variables"]
SECRET = ["Resources", "ConsoleKeySecret"]
ALARM = ["Resources", "ApiErrorsAlarm"]
MUTATIONS = {
    "secret deleted with the stack": (check_console_key, _set(SECRET + ["DeletionPolicy"], "Delete")),
    "secret replaced on update": (check_console_key, _set(SECRET + ["UpdateReplacePolicy"], delete=True)),
    "short secret": (
        check_console_key,
        _set(SECRET + ["Properties", "GenerateSecretString", "PasswordLength"], 16),
    ),
    "secret not passed": (check_console_key, _set(ENV + ["RARA_CONSOLE_KEY_SECRET_ARN"], delete=True)),
    "grant dropped": (check_console_key, _drop_console_key_grant),
    "grant widened": (check_console_key, _widen_console_key_grant),
    "another role reads it": (check_console_key, _grant_console_key_to_the_executor),
    "no iam declaration": (check_api_starts_closed, _set(ENV + ["RARA_API_AUTH"], delete=True)),
    "url without iam": (check_api_starts_closed, _set(["Resources", "ApiFunctionUrl", "Properties", "AuthType"], "NONE")),
    "operators not passed": (check_api_starts_closed, _set(ENV + ["RARA_API_OPERATORS"], "")),
    "no reserved concurrency": (check_api_hygiene, _set(FN + ["ReservedConcurrentExecutions"], delete=True)),
    "log group deleted": (check_api_hygiene, _set(["Resources", "ApiLogGroup", "DeletionPolicy"], delete=True)),
    "alarm on another metric": (check_api_hygiene, _set(ALARM + ["Properties", "MetricName"], "Url4xxCount")),
    "alarm removed": (check_api_hygiene, _set(ALARM, delete=True)),
    "url streams": (
        check_api_hygiene,
        _set(["Resources", "ApiFunctionUrl", "Properties", "InvokeMode"], "RESPONSE_STREAM"),
    ),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_breaking_an_api_property_is_reported(template, name):
    check, change = MUTATIONS[name]
    params = SCENARIOS["full"]
    assert check(tc.resolve(template, params)) == [], "the real template passes"
    assert check(tc.resolve(_with(template, change), params)) != [], f"{name} went unnoticed"


def test_the_shared_iam_check_refuses_the_console_key_to_another_role(template):
    broken = _with(template, _grant_console_key_to_the_executor)
    assert any("ConsoleKeySecret" in p for p in tc.check_iam(tc.resolve(broken, SCENARIOS["full"])))
