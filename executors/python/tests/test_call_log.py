"""The artifact store's S3 calls as the IAM check sees them (``rara_worker.call_log``): on
LocalStack's S3, the store's own calls are recorded and must be exactly the task role's calls
that ``infra/tests/executor_service_calls.jsonl`` lists for the template checks (which run
without AWS). A call the store starts making, or stops making, fails here until the fixture,
and with it the template's grants, say so."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from support import localstack_s3
from rara_worker import call_log
from rara_worker.store import PART_BYTES, artifact_key, open_store

ENDPOINT = os.environ.get("AWS_ENDPOINT_URL", "http://localhost:4566")
FIXTURE = Path(__file__).resolve().parents[3] / "infra/tests/executor_service_calls.jsonl"
RUN, STEP = str(uuid.uuid4()), str(uuid.uuid4())


def test_a_key_is_named_by_its_layout_relative_to_the_store() -> None:
    key = f"pre/runs/{RUN}/{STEP}/12/report.csv"
    assert call_log.relative(key, "pre") == "runs/{run}/{step}/{attempt}/report.csv"
    assert call_log.relative(f"runs/{RUN}/{STEP}/3.output.json", "") == "runs/{run}/{step}/{attempt}.output.json"
    # Outside the prefix, or not the layout: as it is, so the check denies what lies outside runs/.
    assert call_log.relative("other/runs/x", "pre") == "other/runs/x"
    assert call_log.relative("runs/not-a-uuid/y/z", "") == "runs/not-a-uuid/y/z"


class Generated:
    """``size`` bytes read as a stream; with ``fail_at``, a read beyond it raises."""

    def __init__(self, size: int, fail_at: int | None = None) -> None:
        self.left, self.read_so_far, self.fail_at = size, 0, fail_at

    def read(self, n: int = -1) -> bytes:
        n = self.left if n is None or n < 0 else min(n, self.left)
        if self.fail_at is not None and self.read_so_far + n > self.fail_at:
            raise OSError("the source broke mid-upload")
        self.left -= n
        self.read_so_far += n
        return b"r" * n


@pytest.mark.skipif(not localstack_s3(ENDPOINT), reason="LocalStack's S3 is not reachable (scripts/localstack.sh start)")
def test_the_store_makes_exactly_the_task_roles_calls_of_the_fixture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3
    from botocore.config import Config

    for k, v in {"AWS_ENDPOINT_URL": ENDPOINT, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                 "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(k, os.environ.get(k, v) if k != "AWS_ENDPOINT_URL" else v)
    bucket = f"rara-py-{uuid.uuid4().hex[:12]}"
    # The harness's own client is not recorded: only the store's.
    boto3.client("s3", config=Config(s3={"addressing_style": "path"})).create_bucket(Bucket=bucket)
    monkeypatch.setenv(call_log.ENV, str(tmp_path / "calls"))
    store = open_store(f"s3://{bucket}/pre")
    key = artifact_key(RUN, STEP, 2, "report.csv")

    uri, size, _ = store.put(key, Generated(1024), "text/csv")  # one PutObject
    assert size == 1024
    _, size, _ = store.put(key, Generated(2 * PART_BYTES + 1), "text/csv")  # multipart
    assert size == 2 * PART_BYTES + 1
    with pytest.raises(OSError, match="broke"):  # a multipart upload aborted
        store.put(key, Generated(3 * PART_BYTES, fail_at=PART_BYTES + 1), "text/csv")
    assert len(store.open(uri).read()) == 2 * PART_BYTES + 1

    lines = [json.loads(line) for f in sorted((tmp_path / "calls").glob("calls-py-*.jsonl")) for line in f.open()]
    operations = {line["operation"] for line in lines}
    assert operations == {"PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload",
                          "AbortMultipartUpload", "GetObject"}, operations
    assert {(line["role"], line["template"]) for line in lines} == {("TaskRole", "infra/executor-service.yaml")}
    recorded = {(line["action"], line["resource"]) for line in lines}
    with FIXTURE.open() as f:
        fixture = {(c["action"], c["resource"]) for c in map(json.loads, filter(str.strip, f)) if c["role"] == "TaskRole"}
    assert recorded == fixture, f"recorded {sorted(recorded)}, the fixture lists {sorted(fixture)}"
