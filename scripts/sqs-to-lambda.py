#!/usr/bin/env python3
"""Lambda's SQS event source, emulated for `cargo lambda watch` (no Docker, no AWS).

Receives up to 10 messages at a time (all attributes and message attributes) from an SQS
queue, builds the Lambda SQS event (the shape of tests/fixtures/sqs-event.json), POSTs it to
the function's invocations endpoint and settles the batch as the event source does with
ReportBatchItemFailures:

- the function answers a partial batch response: every message NOT listed in
  `batchItemFailures` is deleted; the listed ones are left alone and come back after their
  visibility (which the function may have changed itself);
- the function errs (an error answer, a timeout, an answer that is not a valid batch
  response, a listed id that is not in the batch): nothing is deleted, the whole batch comes
  back after its visibility.

One JSON line per record and invocation goes to --log (message id, the step id of a rara step
message, receive count, fate), so a caller can check how each message travelled.

    scripts/sqs-to-lambda.py --queue-url URL --port 9000 [--function executor]
                             [--until-run RUN_ID --rara target/debug/rara] [--max-seconds N]

Stops on SIGTERM / SIGINT after the batch under way is settled, when the --until-run run has
finished (read with `rara --json status`), or after --max-seconds. The AWS client follows the
SDK environment (AWS_ENDPOINT_URL, AWS_REGION, credentials). Needs boto3.
"""

import argparse
import base64
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import boto3

RECEIVE_MAX = 10  # SQS's limit for one receive, and the event source's default batch size.
TERMINAL = {"succeeded", "failed", "cancelled"}


def log(msg):
    print(f"sqs-to-lambda: {msg}", file=sys.stderr, flush=True)


class Stop:
    """Set by SIGTERM / SIGINT: the loop ends once the batch under way is settled."""

    requested = False

    @classmethod
    def install(cls):
        def handler(signum, _frame):
            cls.requested = True
            log(f"{signal.Signals(signum).name}: stopping after the batch under way")

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)


def lambda_message_attributes(attributes):
    """SQS's MessageAttributes as the event source writes them (camelCase, base64 binaries)."""
    out = {}
    for name, value in (attributes or {}).items():
        entry = {
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": value["DataType"],
        }
        if "StringValue" in value:
            entry["stringValue"] = value["StringValue"]
        if "BinaryValue" in value:
            entry["binaryValue"] = base64.b64encode(value["BinaryValue"]).decode("ascii")
        out[name] = entry
    return out


def lambda_record(message, queue_arn, region):
    record = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message.get("Attributes", {}),
        "messageAttributes": lambda_message_attributes(message.get("MessageAttributes")),
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }
    if "MD5OfMessageAttributes" in message:
        record["md5OfMessageAttributes"] = message["MD5OfMessageAttributes"]
    return record


def step_ids(body):
    """The step ids a rara step message names (format 1: one; format 2: several), else [None]."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return [None]
    if not isinstance(parsed, dict):
        return [None]
    if parsed.get("v") == 2 and isinstance(parsed.get("steps"), list):
        return [s[0] for s in parsed["steps"] if isinstance(s, list) and s] or [None]
    return [parsed.get("step_id")]


def invoke(url, event, timeout):
    """POSTs the event. Returns (set of returned message ids, None) or (None, function error)."""
    request = urllib.request.Request(
        url, data=json.dumps(event).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
            function_error = response.headers.get("X-Amz-Function-Error")
    except urllib.error.HTTPError as e:
        return None, f"HTTP {e.code}: {e.read()[:500]!r}"
    except (urllib.error.URLError, TimeoutError, OSError) as e:
        return None, f"invocation failed: {e}"
    if function_error:
        return None, f"function error {function_error}: {body[:500]!r}"
    # Lambda's rules for ReportBatchItemFailures: an empty or null response, or an empty or
    # null list, is a complete success; anything malformed is a complete failure.
    if not body.strip():
        return set(), None
    try:
        answer = json.loads(body)
    except ValueError:
        return None, f"not JSON: {body[:500]!r}"
    if answer is None:
        return set(), None
    if not isinstance(answer, dict) or "errorType" in answer or "errorMessage" in answer:
        return None, f"function error: {body[:500]!r}"
    failures = answer.get("batchItemFailures")
    if failures is None:
        return set(), None
    ids = {item.get("itemIdentifier") if isinstance(item, dict) else None for item in failures}
    batch = {record["messageId"] for record in event["Records"]}
    if None in ids or "" in ids or not ids <= batch:
        return None, f"invalid batchItemFailures: {failures!r}"
    return ids, None


def delete(sqs, queue_url, messages):
    """Deletes `messages`; answers the ids of those whose delete failed (they come back)."""
    undeleted = set()
    for i in range(0, len(messages), RECEIVE_MAX):
        chunk = messages[i : i + RECEIVE_MAX]
        entries = [{"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(chunk)]
        try:
            failed = sqs.delete_message_batch(QueueUrl=queue_url, Entries=entries).get("Failed", [])
        except Exception as e:  # undeleted messages come back; the steps' fences make that safe
            log(f"delete failed: {e}; those messages come back")
            failed = entries
        for f in failed:
            message_id = chunk[int(f["Id"])]["MessageId"]
            log(f"delete of {message_id} failed: {f.get('Message', 'no reason given')}")
            undeleted.add(message_id)
    return undeleted


def run_status(rara, run_id):
    result = subprocess.run(
        [rara, "--json", "status", run_id], capture_output=True, text=True, check=False, timeout=30
    )
    if result.returncode != 0:
        log(f"rara status {run_id} failed: {result.stderr.strip()}")
        return None
    return json.loads(result.stdout).get("status")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queue-url", default=os.environ.get("RARA_QUEUE_URL"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("CARGO_LAMBDA_PORT", "9000")))
    parser.add_argument("--function", default="executor")
    parser.add_argument("--wait-seconds", type=int, default=1, help="long-poll wait of one receive")
    parser.add_argument(
        "--invoke-timeout",
        type=float,
        default=float(os.environ.get("RARA_FUNCTION_TIMEOUT_SECONDS", "60")) + 30,
        help="how long an invocation may take before it counts as a function error",
    )
    parser.add_argument("--log", help="append one JSON line per record and invocation here")
    parser.add_argument("--until-run", help="stop once this run has finished")
    parser.add_argument("--rara", default="rara", help="the rara binary (for --until-run)")
    parser.add_argument("--max-seconds", type=float, help="stop after this long")
    args = parser.parse_args()
    if not args.queue_url:
        parser.error("--queue-url (or RARA_QUEUE_URL) is required")

    Stop.install()
    sqs = boto3.client("sqs")
    region = sqs.meta.region_name
    queue_arn = sqs.get_queue_attributes(QueueUrl=args.queue_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    url = f"http://127.0.0.1:{args.port}/2015-03-31/functions/{args.function}/invocations"
    journal = open(args.log, "a", encoding="utf-8") if args.log else None

    def note(entry):
        if journal:
            journal.write(json.dumps(entry) + "\n")
            journal.flush()

    log(f"{args.queue_url} -> {url}")
    started = time.monotonic()
    while not Stop.requested:
        if args.max_seconds is not None and time.monotonic() - started > args.max_seconds:
            log(f"--max-seconds {args.max_seconds:g} reached")
            break
        if args.until_run and run_status(args.rara, args.until_run) in TERMINAL:
            log(f"run {args.until_run} finished")
            break
        try:
            messages = sqs.receive_message(
                QueueUrl=args.queue_url,
                MaxNumberOfMessages=RECEIVE_MAX,
                WaitTimeSeconds=args.wait_seconds,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
        except Exception as e:  # a failed receive is retried, like the event source does
            log(f"receive failed: {e}; trying again")
            time.sleep(1)
            continue
        if not messages:
            continue
        event = {"Records": [lambda_record(m, queue_arn, region) for m in messages]}
        began = time.monotonic()
        returned, error = invoke(url, event, args.invoke_timeout)
        elapsed_ms = round((time.monotonic() - began) * 1000)
        if error:
            log(f"batch of {len(messages)}: {error}; every message comes back after its visibility")
            returned = {m["MessageId"] for m in messages}
        undeleted = delete(sqs, args.queue_url, [m for m in messages if m["MessageId"] not in returned])
        note({"invocation_ms": elapsed_ms, "records": len(messages), "returned": len(returned), "error": error})
        for m in messages:
            for step in step_ids(m["Body"]):
                note(
                    {
                        "message_id": m["MessageId"],
                        "step_id": step,
                        "receive_count": int(m.get("Attributes", {}).get("ApproximateReceiveCount", "0")),
                        "fate": "returned"
                        if m["MessageId"] in returned
                        else "undeleted" if m["MessageId"] in undeleted else "deleted",
                    }
                )
        deleted = len(messages) - len(returned) - len(undeleted)
        log(f"batch of {len(messages)} in {elapsed_ms} ms: {deleted} deleted, {len(returned)} come back")
    if journal:
        journal.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
