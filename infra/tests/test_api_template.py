"""The optional HTTP API (EnableApi): a function URL with AWS_IAM auth, its own role with the
least it needs (its log group and the database secret, nothing on SQS), nothing at all when off."""

from __future__ import annotations

import pytest

import template_checks as tc

ON = {**tc.REQUIRED_PARAMS, "EnableApi": "true"}
API_RESOURCES = {"ApiFunction", "ApiRole", "ApiLogGroup", "ApiFunctionUrl"}


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


def test_the_api_role_reads_the_secret_and_writes_its_logs_and_nothing_else(template):
    r = tc.resolve(template, {**ON, **tc.FULL_OPTIONS})
    statements = [st for where, st in tc._statements(r) if where.startswith("ApiRole.Properties.Policies")]
    actions = sorted(a for st in statements for a in tc._as_list(st["Action"]))
    assert actions == ["kms:Decrypt", "logs:CreateLogStream", "logs:PutLogEvents", "secretsmanager:GetSecretValue"]
    assert tc.check_iam(r) == []
