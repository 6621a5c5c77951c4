#!/usr/bin/env python3
"""End-to-end check of a running LocalStack (started by scripts/localstack.sh start).

    eval "$(scripts/localstack.sh env)"
    scripts/localstack-smoke.py        # reruns itself with .venv-localstack/bin/python

Takes the endpoint from AWS_ENDPOINT_URL (default http://localhost:4566). Checks SQS
semantics the executor relies on (redrive to a DLQ after maxReceiveCount receives,
visibility timeout, ChangeMessageVisibility, receive counts), then CloudFormation
(a queue + DLQ stack), an EventBridge rule delivering to SQS, S3, STS, SSM and
Secrets Manager. Every resource gets a unique name and is deleted at the end, so the
script can be rerun against the same instance. Exit 0 when everything passed.
"""

import json
import os
import sys
import time
import uuid

# Use boto3 from the LocalStack venv (scripts/localstack.sh install): rerun with its Python.
VENV_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".venv-localstack", "bin", "python")
if os.path.exists(VENV_PY) and os.path.abspath(sys.prefix) != os.path.abspath(os.path.join(VENV_PY, "..", "..")):
    os.execv(VENV_PY, [VENV_PY, *sys.argv])
try:
    import boto3
    from botocore.config import Config
except ImportError:
    sys.exit("boto3 not found: run scripts/localstack.sh install first")

ENDPOINT = os.environ.get("AWS_ENDPOINT_URL", "http://localhost:4566")
REGION = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")
RUN = uuid.uuid4().hex[:8]

CFG = Config(retries={"max_attempts": 2}, s3={"addressing_style": "path"}, connect_timeout=5, read_timeout=30)


def client(service):
    return boto3.client(service, endpoint_url=ENDPOINT, region_name=REGION, config=CFG)


failures = []
cleanup = []


def check(name, cond, detail=""):
    print(f"  {'ok  ' if cond else 'FAIL'} {name}" + (f" ({detail})" if detail else ""))
    if not cond:
        failures.append(name)
    return cond


def receive(sqs, url, wait=0, visibility=None, n=1):
    kw = dict(QueueUrl=url, MaxNumberOfMessages=n, WaitTimeSeconds=wait, MessageSystemAttributeNames=["All"])
    if visibility is not None:
        kw["VisibilityTimeout"] = visibility
    return sqs.receive_message(**kw).get("Messages", [])


def test_sqs():
    print("SQS: redrive to DLQ, visibility timeout, ChangeMessageVisibility")
    sqs = client("sqs")
    dlq_url = sqs.create_queue(QueueName=f"smoke-{RUN}-dlq")["QueueUrl"]
    cleanup.append(lambda: sqs.delete_queue(QueueUrl=dlq_url))
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    url = sqs.create_queue(
        QueueName=f"smoke-{RUN}",
        Attributes={
            "VisibilityTimeout": "1",
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "2"}),
        },
    )["QueueUrl"]
    cleanup.append(lambda: sqs.delete_queue(QueueUrl=url))
    check("queue URL is path style on the endpoint", url.startswith(ENDPOINT.rstrip("/") + "/"), url)

    body = f"hello {RUN}"
    sent = sqs.send_message(QueueUrl=url, MessageBody=body)["MessageId"]

    m1 = receive(sqs, url, wait=2)
    check("1st receive gets the message", len(m1) == 1 and m1[0]["MessageId"] == sent)
    if m1:
        check("receive count 1", m1[0]["Attributes"].get("ApproximateReceiveCount") == "1")
    check("invisible while in flight", receive(sqs, url) == [])
    time.sleep(1.3)
    m2 = receive(sqs, url, wait=2)
    check("2nd receive after visibility timeout", len(m2) == 1 and m2[0]["MessageId"] == sent)
    if m2:
        check("receive count 2", m2[0]["Attributes"].get("ApproximateReceiveCount") == "2")
    time.sleep(1.3)
    m3 = receive(sqs, url, wait=1)
    check("3rd receive gets nothing (moved to DLQ)", m3 == [], f"{len(m3)} messages")

    d = receive(sqs, dlq_url, wait=3)
    check("message is in the DLQ", len(d) == 1 and d[0]["Body"] == body and d[0]["MessageId"] == sent)
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    check(
        "source queue empty",
        attrs["ApproximateNumberOfMessages"] == "0" and attrs["ApproximateNumberOfMessagesNotVisible"] == "0",
    )

    # ChangeMessageVisibility: extend, then release early.
    sqs.send_message(QueueUrl=url, MessageBody="vis")
    (m,) = receive(sqs, url, wait=2, visibility=1) or [None]
    if check("receive for visibility test", m is not None):
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=30)
        time.sleep(1.5)
        check("extended to 30 s: still invisible after 1.5 s", receive(sqs, url) == [])
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
        again = receive(sqs, url, wait=2)
        check("set to 0: visible again at once", len(again) == 1 and again[0]["Body"] == "vis")
        if again:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=again[0]["ReceiptHandle"])
            check("deleted", receive(sqs, url) == [])

    # batch send / receive, a rough per-call latency figure
    entries = [{"Id": str(i), "MessageBody": f"b{i}"} for i in range(10)]
    t = time.perf_counter()
    n = 20
    for _ in range(n):
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    per_call = (time.perf_counter() - t) / n * 1000
    got = 0
    while True:
        ms = receive(sqs, url, n=10)
        if not ms:
            break
        got += len(ms)
        sqs.delete_message_batch(
            QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": x["ReceiptHandle"]} for i, x in enumerate(ms)]
        )
    check("batch of 200 sent, received and deleted", got == 10 * n, f"{got}; {per_call:.1f} ms per SendMessageBatch")


CFN_TEMPLATE = {
    "AWSTemplateFormatVersion": "2010-09-09",
    "Resources": {
        "Dlq": {"Type": "AWS::SQS::Queue", "Properties": {"MessageRetentionPeriod": 1209600}},
        "Queue": {
            "Type": "AWS::SQS::Queue",
            "Properties": {
                "VisibilityTimeout": 60,
                "RedrivePolicy": {"deadLetterTargetArn": {"Fn::GetAtt": ["Dlq", "Arn"]}, "maxReceiveCount": 3},
            },
        },
    },
    "Outputs": {"QueueUrl": {"Value": {"Ref": "Queue"}}, "DlqArn": {"Value": {"Fn::GetAtt": ["Dlq", "Arn"]}}},
}


def test_cloudformation():
    print("CloudFormation: queue + DLQ stack")
    cfn, sqs = client("cloudformation"), client("sqs")
    name = f"smoke-{RUN}"
    t = time.perf_counter()
    cfn.create_stack(StackName=name, TemplateBody=json.dumps(CFN_TEMPLATE))
    cleanup.append(lambda: cfn.delete_stack(StackName=name))
    cfn.get_waiter("stack_create_complete").wait(StackName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
    stack = cfn.describe_stacks(StackName=name)["Stacks"][0]
    check("stack CREATE_COMPLETE", stack["StackStatus"] == "CREATE_COMPLETE", f"{time.perf_counter() - t:.1f} s")
    out = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    attrs = sqs.get_queue_attributes(QueueUrl=out["QueueUrl"], AttributeNames=["All"])["Attributes"]
    rp = json.loads(attrs.get("RedrivePolicy", "{}"))
    check(
        "deployed queue has the redrive policy",
        rp.get("deadLetterTargetArn") == out["DlqArn"] and int(rp.get("maxReceiveCount", 0)) == 3,
    )
    check("deployed queue visibility timeout 60", attrs.get("VisibilityTimeout") == "60")


def test_events():
    print("EventBridge: rule -> SQS target")
    ev, sqs = client("events"), client("sqs")
    qurl = sqs.create_queue(QueueName=f"smoke-{RUN}-events")["QueueUrl"]
    cleanup.append(lambda: sqs.delete_queue(QueueUrl=qurl))
    qarn = sqs.get_queue_attributes(QueueUrl=qurl, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    rule = f"smoke-{RUN}"
    ev.put_rule(Name=rule, EventPattern=json.dumps({"source": ["rara.smoke"]}), State="ENABLED")
    ev.put_targets(Rule=rule, Targets=[{"Id": "q", "Arn": qarn}])
    cleanup.append(lambda: ev.delete_rule(Name=rule))
    cleanup.append(lambda: ev.remove_targets(Rule=rule, Ids=["q"]))
    r = ev.put_events(Entries=[{"Source": "rara.smoke", "DetailType": "smoke", "Detail": json.dumps({"run": RUN})}])
    check("put_events accepted", r["FailedEntryCount"] == 0)
    ms = receive(sqs, qurl, wait=5)
    ok = len(ms) == 1 and json.loads(ms[0]["Body"]).get("detail", {}).get("run") == RUN
    check("event delivered to the queue", ok)


def test_misc():
    print("S3, STS, SSM, Secrets Manager")
    s3 = client("s3")
    bucket = f"smoke-{RUN}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="k", Body=b"v")
    cleanup.append(lambda: s3.delete_bucket(Bucket=bucket))
    cleanup.append(lambda: s3.delete_object(Bucket=bucket, Key="k"))
    check("s3 put/get", s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v")
    check("sts get_caller_identity", bool(client("sts").get_caller_identity().get("Account")))
    ssm = client("ssm")
    ssm.put_parameter(Name=f"/smoke/{RUN}", Value="x", Type="String")
    cleanup.append(lambda: ssm.delete_parameter(Name=f"/smoke/{RUN}"))
    check("ssm put/get parameter", ssm.get_parameter(Name=f"/smoke/{RUN}")["Parameter"]["Value"] == "x")
    sm = client("secretsmanager")
    sm.create_secret(Name=f"smoke-{RUN}", SecretString="s3cr3t")
    cleanup.append(lambda: sm.delete_secret(SecretId=f"smoke-{RUN}", ForceDeleteWithoutRecovery=True))
    check("secretsmanager create/get", sm.get_secret_value(SecretId=f"smoke-{RUN}")["SecretString"] == "s3cr3t")


def main():
    print(f"LocalStack smoke test against {ENDPOINT} ({REGION}), run {RUN}")
    t = time.perf_counter()
    for test in (test_sqs, test_cloudformation, test_events, test_misc):
        try:
            test()
        except Exception as e:  # report and go on with the next group
            check(f"{test.__name__} raised", False, f"{type(e).__name__}: {e}")
    for undo in reversed(cleanup):
        try:
            undo()
        except Exception as e:
            print(f"  (cleanup: {type(e).__name__}: {e})")
    took = time.perf_counter() - t
    if failures:
        print(f"FAILED: {len(failures)} check(s) in {took:.1f} s: {', '.join(failures)}")
        return 1
    print(f"all checks passed in {took:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
