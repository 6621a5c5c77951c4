"""Property tests of infra/template.yaml and samconfig.toml (run by scripts/check-template.sh).

The checks live in template_checks.py as functions returning lists of problems. The first
tests prove the template and samconfig.toml have none, for every allowed TimingProfile x
MaxAttemptsLimit, with and without the optional parts (VPC, KMS, RDS Proxy, alarm topic).
The mutation tests break one relation at a time in memory and prove the checker reports it.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import pytest

import template_checks as tc


@pytest.fixture(scope="module")
def template() -> dict:
    return tc.load_template()


@pytest.fixture(scope="module")
def samconfig() -> dict[str, dict[str, str]]:
    return tc.samconfig_overrides()


# ------------------------------------------------------------------ the real files


def test_template_has_no_problems_in_any_scenario(template, samconfig):
    assert tc.all_problems(template, samconfig) == []


def test_every_profile_and_attempt_limit_is_evaluated(template):
    names = [name for name, _ in tc.scenarios(template)]
    timing = template["Parameters"]["TimingProfile"]["AllowedValues"]
    attempts = template["Parameters"]["MaxAttemptsLimit"]["AllowedValues"]
    assert len(names) == len(timing) * len(attempts) * 2
    assert set(timing) == set(template["Mappings"]["Timing"])
    assert set(attempts) == set(template["Mappings"]["Attempts"])


def test_samconfig_has_default_and_staging_with_valid_parameters(template, samconfig):
    assert {"default", "staging"} <= set(samconfig)
    for env, params in samconfig.items():
        assert tc.check_parameter_values(template, params, env) == []


def test_samconfig_deploy_settings():
    import tomllib

    with open(tc.SAMCONFIG, "rb") as f:
        config = tomllib.load(f)
    for env in ("default", "staging"):
        deploy = config[env]["deploy"]["parameters"]
        assert deploy["capabilities"] == "CAPABILITY_IAM"
        assert deploy["resolve_s3"] is True
        assert config[env]["global"]["parameters"]["stack_name"]
        assert config[env]["global"]["parameters"]["region"]
        build = config[env]["build"]["parameters"]
        assert build["beta_features"] is True  # rust-cargolambda is a beta build method
        assert build["template_file"] == "infra/template.yaml"
        assert "template_file" not in deploy  # deploy takes the built template


def test_values_reach_the_functions_as_the_queue_has_them(template):
    """Spot-check one scenario by value, independent of the checker's own logic."""
    r = tc.resolve(template, {**tc.REQUIRED_PARAMS, "TimingProfile": "long", "MaxAttemptsLimit": "8"})
    env = r.props(tc.EXECUTOR)["Environment"]["Variables"]
    queue = r.props(tc.QUEUE)
    assert str(env["RARA_VISIBILITY_TIMEOUT_SECONDS"]) == str(queue["VisibilityTimeout"]) == "1800"
    assert str(env["RARA_MAX_RECEIVE_COUNT"]) == str(queue["RedrivePolicy"]["maxReceiveCount"]) == "13"
    assert str(env["RARA_FUNCTION_TIMEOUT_SECONDS"]) == str(r.props(tc.EXECUTOR)["Timeout"]) == "300"
    # The executor alone of the two is told where the remote executors' credential is.
    assert env.pop("RARA_REMOTE_CREDENTIALS_SECRET_ARN") == ""
    assert env == r.props(tc.SCHEDULER)["Environment"]["Variables"]


def test_the_executor_and_the_api_alone_read_the_remote_credential(template):
    arn = tc.FULL_OPTIONS["RemoteCredentialsSecretArn"]

    def grants(r: tc.Resolved) -> list[tuple[str, str]]:
        return [
            (where.split(".", 1)[0], st["Resource"])
            for where, st in tc._statements(r)
            if st.get("Resource") == arn and st.get("Action") == "secretsmanager:GetSecretValue"
        ]

    r = tc.resolve(template, {**tc.REQUIRED_PARAMS, **tc.FULL_OPTIONS})
    assert r.props(tc.EXECUTOR)["Environment"]["Variables"]["RARA_REMOTE_CREDENTIALS_SECRET_ARN"] == arn
    # The API's cancel tells detached attempts to stop, with the executor's credential.
    assert r.props("ApiFunction")["Environment"]["Variables"]["RARA_REMOTE_CREDENTIALS_SECRET_ARN"] == arn
    assert "RARA_REMOTE_CREDENTIALS_SECRET_ARN" not in r.props(tc.SCHEDULER)["Environment"]["Variables"]
    assert sorted(grants(r)) == [("ApiRole", arn), ("ExecutorRole", arn)]
    assert tc.check_iam(r) == []
    unset = tc.resolve(template, tc.REQUIRED_PARAMS)
    assert grants(unset) == [] and not [st for _, st in tc._statements(unset) if st.get("Sid") == "RemoteCredentials"]


OWN_SECRETS = {
    "SchedulerDatabaseSecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:rara/db-scheduler-AbCdEf",
    "ExecutorDatabaseSecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:rara/db-executor-AbCdEf",
    "ApiDatabaseSecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:rara/db-api-AbCdEf",
}


def test_each_function_reads_its_own_database_secret_and_no_other(template):
    shared = tc.REQUIRED_PARAMS["DatabaseSecretArn"]

    def database_grants(r: tc.Resolved) -> dict[str, set[str]]:
        secrets = {shared, *OWN_SECRETS.values()}
        out: dict[str, set[str]] = {}
        for where, st in tc._statements(r):
            for res in tc._as_list(st.get("Resource")):
                if res in secrets and st.get("Action") == "secretsmanager:GetSecretValue":
                    out.setdefault(where.split(".", 1)[0], set()).add(res)
        return out

    def env(r: tc.Resolved, fn: str) -> str:
        return r.props(fn)["Environment"]["Variables"]["RARA_DATABASE_SECRET_ARN"]

    options = {**tc.REQUIRED_PARAMS, **tc.FULL_OPTIONS}
    own = tc.resolve(template, {**options, **OWN_SECRETS})
    assert (env(own, tc.SCHEDULER), env(own, tc.EXECUTOR), env(own, "ApiFunction")) == tuple(OWN_SECRETS.values())
    assert database_grants(own) == {
        "SchedulerRole": {OWN_SECRETS["SchedulerDatabaseSecretArn"]},
        "ExecutorRole": {OWN_SECRETS["ExecutorDatabaseSecretArn"]},
        "ApiRole": {OWN_SECRETS["ApiDatabaseSecretArn"]},
        "RdsProxyRole": {shared, *OWN_SECRETS.values()},
    }
    proxy = [a["SecretArn"] for a in own.props("RdsProxy")["Auth"]]
    assert sorted(proxy) == sorted([shared, *OWN_SECRETS.values()]), "the proxy authenticates every login"
    assert tc.check_iam(own) == [] and tc.check_environment(own) == []

    # Without them every function falls back to the shared secret (existing deploys).
    fallback = tc.resolve(template, options)
    assert {env(fallback, fn) for fn in (tc.SCHEDULER, tc.EXECUTOR, "ApiFunction")} == {shared}
    assert {role: s for role, s in database_grants(fallback).items()} == {
        role: {shared} for role in ("SchedulerRole", "ExecutorRole", "ApiRole", "RdsProxyRole")
    }

    # The check can fail: the scheduler's role given the API's secret is named.
    broken = copy.deepcopy(template)
    statements = broken["Resources"]["SchedulerRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
    for st in statements:
        if isinstance(st, dict) and st.get("Sid") == "DatabaseSecret":
            st["Resource"] = {"Ref": "ApiDatabaseSecretArn"}
    problems = tc.check_iam(tc.resolve(broken, {**options, **OWN_SECRETS}))
    assert any(p.startswith("SchedulerRole.") and "db-api" in p for p in problems), problems


def test_sam_translation_keeps_the_event_source_and_environment(template, monkeypatch):
    """What SAM generates (AWS::Lambda::EventSourceMapping, AWS::Lambda::Function) still
    carries the settings: the checks above look at the SAM source."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")  # the translator wants one, offline
    from samtranslator.parser.parser import Parser
    from samtranslator.translator.translator import Translator

    packaged = copy.deepcopy(template)
    for name in (tc.SCHEDULER, tc.EXECUTOR, "ApiFunction"):  # what `sam package` does with the build output
        packaged["Resources"][name]["Properties"]["CodeUri"] = f"s3://bucket/{name}.zip"
    out = Translator({}, Parser()).translate(sam_template=packaged, parameter_values={})
    resources = out["Resources"]
    mappings = [r for r in resources.values() if r["Type"] == "AWS::Lambda::EventSourceMapping"]
    assert len(mappings) == 1
    esm = mappings[0]["Properties"]
    assert esm["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert esm["EventSourceArn"] == {"Fn::GetAtt": ["StepQueue", "Arn"]}
    assert esm["ScalingConfig"] == {"MaximumConcurrency": {"Ref": "MaximumConcurrency"}}
    assert esm["BatchSize"] == {"Ref": "BatchSize"}
    assert esm["MaximumBatchingWindowInSeconds"] == {"Ref": "MaximumBatchingWindowInSeconds"}
    rules = [r for r in resources.values() if r["Type"] == "AWS::Events::Rule"]
    assert len(rules) == 1 and rules[0]["Properties"]["ScheduleExpression"] == {"Ref": "ScheduleExpression"}
    for name in (tc.SCHEDULER, tc.EXECUTOR):
        fn = resources[name]["Properties"]
        assert fn["Runtime"] == "provided.al2023" and fn["Architectures"] == ["arm64"]
        assert set(tc.REQUIRED_ENV) <= set(fn["Environment"]["Variables"])
    # No role generated by SAM: the functions use the scoped roles of the template.
    assert not [k for k in resources if k.endswith("FunctionRole")]


# ------------------------------------------------------------------ mutations


def _fn_props(t: dict, fn: str) -> dict:
    return t["Resources"][fn]["Properties"]


def _statement(t: dict, role: str, sid: str) -> dict:
    for st in t["Resources"][role]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]:
        if isinstance(st, dict) and st.get("Sid") == sid:
            return st
    raise KeyError(sid)


def _workflow_secrets(t: dict) -> dict:
    """The executor's WorkflowSecrets statement (inside its `Fn::If` on HasSecretsPrefix)."""
    for st in t["Resources"]["ExecutorRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]:
        branches = st.get("Fn::If", [None, {}])
        if isinstance(branches[1], dict) and branches[1].get("Sid") == "WorkflowSecrets":
            return branches[1]
    raise KeyError("WorkflowSecrets")


def _env(t: dict) -> dict:
    return t["Globals"]["Function"]["Environment"]["Variables"]


def _esm(t: dict) -> dict:
    return _fn_props(t, tc.EXECUTOR)["Events"]["Steps"]["Properties"]


def _set(path: list, value: Any) -> Callable[[dict], None]:
    def mutate(t: dict) -> None:
        node = t
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return mutate


def _delete_resource(name: str) -> Callable[[dict], None]:
    return lambda t: t["Resources"].pop(name)


MUTATIONS: dict[str, tuple[Callable[[dict], None], str]] = {
    "misspelt FunctionResponseTypes": (
        lambda t: _esm(t).update(FunctionResponseTypes=["ReportBatchItemFailure"]),
        "FunctionResponseTypes is ['ReportBatchItemFailure']",
    ),
    "FunctionResponseTypes missing": (
        lambda t: _esm(t).pop("FunctionResponseTypes"),
        "FunctionResponseTypes is None",
    ),
    "no MaximumConcurrency": (lambda t: _esm(t).pop("ScalingConfig"), "ScalingConfig.MaximumConcurrency"),
    "event source on the DLQ": (
        lambda t: _esm(t).update(Queue={"Fn::GetAtt": ["DeadLetterQueue", "Arn"]}),
        "Queue is not StepQueue.Arn",
    ),
    "maxReceiveCount 2 in the mapping": (
        _set(["Mappings", "Attempts", "5", "MaxReceiveCount"], 2),
        "maxReceiveCount 2 < max attempts limit 5 + 3",
    ),
    "maxReceiveCount 2 on the queue only": (
        _set(["Resources", "StepQueue", "Properties", "RedrivePolicy", "maxReceiveCount"], 2),
        "RARA_MAX_RECEIVE_COUNT=10 but the stack has 2",
    ),
    "redrive to the wrong queue": (
        _set(["Resources", "StepQueue", "Properties", "RedrivePolicy", "deadLetterTargetArn"], "arn:aws:sqs:us-east-1:123456789012:other"),
        "redrive policy does not target DeadLetterQueue.Arn",
    ),
    "visibility below 6 x timeout": (
        _set(["Mappings", "Timing", "standard", "VisibilityTimeout"], 120),
        "visibility timeout 120 s < 6 x executor timeout 60 s",
    ),
    "visibility literal on the queue": (
        _set(["Resources", "StepQueue", "Properties", "VisibilityTimeout"], 400),
        "RARA_VISIBILITY_TIMEOUT_SECONDS=360 but the stack has 400",
    ),
    "executor timeout literal": (
        _set(["Resources", "ExecutorFunction", "Properties", "Timeout"], 900),
        "visibility timeout 360 s < 6 x executor timeout 900 s",
    ),
    "heartbeat above lease / 3": (
        _set(["Mappings", "Timing", "standard", "HeartbeatSeconds"], 25),
        "heartbeat 25 s > lease 60 s / 3",
    ),
    "heartbeat broken in one profile only": (
        _set(["Mappings", "Timing", "max", "HeartbeatSeconds"], 200),
        "[TimingProfile=max MaxAttemptsLimit=3] heartbeat 200 s > lease 300 s / 3",
    ),
    "scheduler budget beyond its timeout": (
        _set(["Mappings", "Timing", "quick", "SchedulerBudget"], 59),
        "scheduler budget 59 s + 2 s margin does not fit its timeout 60 s",
    ),
    "batching window longer than a lease allows": (
        _set(["Parameters", "MaximumBatchingWindowInSeconds", "MaxValue"], 300),
        "MaximumBatchingWindowInSeconds MaxValue 300 exceeds a third of the shortest lease",
    ),
    "queue URL literal in the environment": (
        lambda t: _env(t).update(RARA_QUEUE_URL="https://sqs.us-east-1.amazonaws.com/123456789012/other"),
        "RARA_QUEUE_URL='https://sqs.us-east-1.amazonaws.com/123456789012/other' but the stack has ${StepQueue}",
    ),
    "RARA_DLQ_URL missing": (lambda t: _env(t).pop("RARA_DLQ_URL"), "RARA_DLQ_URL is not set"),
    "lease only in the executor": (
        lambda t: _fn_props(t, tc.EXECUTOR).setdefault("Environment", {"Variables": {}})["Variables"].update(
            RARA_LEASE_SECONDS=90
        ),
        "RARA_LEASE_SECONDS differs between the scheduler and the executor",
    ),
    "plain DATABASE_URL": (
        lambda t: _env(t).update(DATABASE_URL="postgres://rara:hunter2@db.example.com/rara"),
        "environment variable DATABASE_URL looks like a plain secret",
    ),
    "password variable": (
        lambda t: _env(t).update(RARA_DATABASE_PASSWORD="hunter2"),
        "RARA_DATABASE_PASSWORD looks like a plain secret",
    ),
    "wildcard SQS resource": (
        lambda t: _statement(t, "ExecutorRole", "ConsumeSteps").update(Resource="*"),
        "on wildcard resource '*'",
    ),
    "wildcard SQS ARN": (
        lambda t: _statement(t, "SchedulerRole", "EnqueueSteps").update(
            Resource={"Fn::Sub": "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:*"}
        ),
        "on wildcard resource 'arn:aws:sqs:us-east-1:123456789012:*'",
    ),
    "wildcard SQS action": (
        lambda t: _statement(t, "SchedulerRole", "EnqueueSteps").update(Action="sqs:*"),
        "wildcard action sqs:*",
    ),
    "wildcard secret": (
        lambda t: _statement(t, "ExecutorRole", "DatabaseSecret").update(
            Resource={"Fn::Sub": "arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:*"}
        ),
        "secretsmanager:GetSecretValue on wildcard resource",
    ),
    "secret other than the parameter": (
        lambda t: _statement(t, "SchedulerRole", "DatabaseSecret").update(
            Resource="arn:aws:secretsmanager:us-east-1:123456789012:secret:other-AbCdEf"
        ),
        "not its database secret",
    ),
    "workflow secrets beyond the prefix": (
        lambda t: _workflow_secrets(t).update(
            Resource={"Fn::Sub": "arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:*"}
        ),
        "ExecutorRole: 0 WorkflowSecrets grants for SecretsPrefix 'rara/workflows/'",
    ),
    "workflow secrets for the scheduler": (
        lambda t: t["Resources"]["SchedulerRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"].append(
            copy.deepcopy(_workflow_secrets(t))
        ),
        "secretsmanager:GetSecretValue on the workflow secrets: only ExecutorRole's GetSecretValue",
    ),
    "secrets prefix covering the database secret": (
        _set(["Parameters", "SecretsPrefix", "Default"], "rara/"),
        "SecretsPrefix 'rara/' covers the DatabaseSecretArn",
    ),
    "remote credential for the scheduler": (
        lambda t: _statement(t, "SchedulerRole", "DatabaseSecret").update(Resource={"Ref": "RemoteCredentialsSecretArn"}),
        "not its database secret",
    ),
    "scheduler may delete messages": (
        lambda t: _statement(t, "SchedulerRole", "EnqueueSteps").update(Action=["sqs:SendMessage", "sqs:DeleteMessage"]),
        "SchedulerRole: SQS grants differ (missing [], extra [('StepQueue', 'sqs:DeleteMessage')])",
    ),
    "executor cannot change visibility": (
        lambda t: _statement(t, "ExecutorRole", "ConsumeSteps")["Action"].remove("sqs:ChangeMessageVisibility"),
        "ExecutorRole: SQS grants differ (missing [('StepQueue', 'sqs:ChangeMessageVisibility')]",
    ),
    "executor cannot move a packed step into a message of its own (the d8e1b54 role)": (
        lambda t: _statement(t, "ExecutorRole", "MoveSteps").update(Resource={"Fn::GetAtt": ["DeadLetterQueue", "Arn"]}),
        "ExecutorRole: SQS grants differ (missing [('StepQueue', 'sqs:SendMessage')], extra [])",
    ),
    "operator may purge the step queue": (
        lambda t: t["Resources"]["OperatorPolicy"]["Properties"]["PolicyDocument"]["Statement"][0].update(
            Resource={"Fn::GetAtt": ["StepQueue", "Arn"]}
        ),
        "OperatorPolicy: SQS grants differ",
    ),
    "wildcard in a SAM Policies statement": (
        lambda t: _fn_props(t, tc.EXECUTOR).update(
            Policies=[{"Statement": [{"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": "*"}]}]
        ),
        "ExecutorFunction.Properties.Policies[0].Statement[0]: sqs:SendMessage on wildcard resource '*'",
    ),
    "runtime provided.al2": (
        _set(["Resources", "ExecutorFunction", "Properties", "Runtime"], "provided.al2"),
        "ExecutorFunction: Runtime is 'provided.al2'",
    ),
    "x86_64": (
        _set(["Resources", "SchedulerFunction", "Properties", "Architectures"], ["x86_64"]),
        "SchedulerFunction: Architectures is ['x86_64']",
    ),
    "binaries swapped": (
        _set(["Resources", "SchedulerFunction", "Metadata", "BuildProperties", "Binary"], "executor"),
        "SchedulerFunction: Metadata.BuildProperties.Binary is not 'scheduler'",
    ),
    "no DLQ alarm": (_delete_resource("DeadLetterQueueDepthAlarm"), "no alarm on DLQ depth"),
    "DLQ alarm threshold 10": (
        _set(["Resources", "DeadLetterQueueDepthAlarm", "Properties", "Threshold"], 10),
        "no alarm on DLQ depth",
    ),
    "no queue age alarm": (_delete_resource("StepQueueAgeAlarm"), "no alarm on the age of the oldest message"),
    "no executor errors alarm": (_delete_resource("ExecutorErrorsAlarm"), "no alarm on ExecutorFunction errors"),
    "no queue URL output": (lambda t: t["Outputs"].pop("QueueUrl"), "output QueueUrl"),
}


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_a_broken_relation_is_reported(template, name):
    mutate, expected = MUTATIONS[name]
    broken = copy.deepcopy(template)
    mutate(broken)
    problems = tc.all_problems(broken)
    assert any(expected in p for p in problems), f"{name}: expected {expected!r} in\n" + "\n".join(problems)


def test_bad_samconfig_overrides_are_reported(template):
    problems = tc.check_parameter_values(
        template,
        {"TimingProfile": "fast", "MaxAttemptsLimit": "4", "BatchSize": "1000", "VisibilityTimeout": "30"},
        "samconfig [x]",
    )
    assert "samconfig [x]: TimingProfile=fast is not one of ['quick', 'standard', 'long', 'max']" in problems
    assert any("MaxAttemptsLimit=4 is not one of" in p for p in problems)
    assert "samconfig [x]: BatchSize=1000 is above MaxValue 100" in problems
    assert "samconfig [x]: VisibilityTimeout is not a parameter of the template" in problems
    assert "samconfig [x]: DatabaseSecretArn has no default and is not given" in problems


def test_the_functions_check_the_database_certificate_by_default(template):
    assert template["Parameters"]["DatabaseSslMode"]["Default"] == "verify-full"
    for params in ({}, {"DatabaseCaBundleLayerArn": "arn:aws:lambda:us-east-1:123456789012:layer:rara-rds-ca:3"}):
        r = tc.resolve(template, {**tc.REQUIRED_PARAMS, **params})
        for fn in (tc.SCHEDULER, tc.EXECUTOR):
            env = r.props(fn)["Environment"]["Variables"]
            assert env["RARA_DATABASE_SSL_MODE"] == "verify-full"
            assert env["RARA_DATABASE_SSL_ROOT_CERT"] == "/opt/rds/global-bundle.pem"
        layers = template["Globals"]["Function"]["Layers"]
        assert layers["Fn::If"][0] == "HasCaBundleLayer", layers
    assert tc.resolve(template, {**tc.REQUIRED_PARAMS, "DatabaseSslMode": "require"}).props(tc.EXECUTOR)[
        "Environment"
    ]["Variables"]["RARA_DATABASE_SSL_MODE"] == "require"
