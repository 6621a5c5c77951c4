"""The record of the S3 calls the artifact store makes, for rara's IAM check
(``scripts/check-iam.sh``, ``tools/iam-check``), as rara's own recorder writes them
(``shared/platform/src/call_log.rs``).

With ``RARA_AWS_CALL_LOG=<dir>`` set, every S3 client :class:`~rara_worker.store.S3Store`
builds appends one JSON line per operation to ``<dir>/calls-py-<pid>.jsonl``::

    {"role": "TaskRole", "template": "infra/executor-service.yaml",
     "action": "s3:PutObject", "operation": "UploadPart",
     "resource": "Sub:arn:${AWS::Partition}:s3:::${ArtifactsBucketName}/runs/{run}/{step}/{attempt}/report.csv",
     "site": "rara_worker/store.py:141"}

The executor service has one role for its code, the task role of
``infra/executor-service.yaml``, whose artifact bucket is the ``ArtifactsBucketName``
parameter: the check evaluates each call against that role's policy and the bucket's name the
template is rendered with. The key is taken relative to the store's prefix (a deployment's
store has none: ``s3://${ArtifactsBucketName}``), its run, step and attempt as placeholders, as
rara's recorder does (``call_log/s3.rs``). An operation :data:`ACTIONS` does not name is
recorded as ``s3:unknown``, which no policy grants, so the check fails on it rather than passing
a call nobody priced. Unset (deployed, and every run that does not ask for it), nothing is
installed.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from pathlib import Path
from typing import Any

ENV = "RARA_AWS_CALL_LOG"
ROLE = "TaskRole"
TEMPLATE = "infra/executor-service.yaml"
BUCKET = "${ArtifactsBucketName}"

#: The IAM action each S3 operation the store makes is authorised as.
ACTIONS = {
    "PutObject": "s3:PutObject",
    "CreateMultipartUpload": "s3:PutObject",
    "UploadPart": "s3:PutObject",
    "CompleteMultipartUpload": "s3:PutObject",
    "AbortMultipartUpload": "s3:AbortMultipartUpload",
    "GetObject": "s3:GetObject",
    "HeadObject": "s3:GetObject",
}

_UUID = re.compile(r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}")
_lock = threading.Lock()
_PACKAGE = str(Path(__file__).resolve().parent)


def install(client: Any, prefix: str) -> None:
    """Record ``client``'s S3 calls when ``RARA_AWS_CALL_LOG`` is set; ``prefix`` is the
    store's (``s3://bucket/prefix``)."""
    directory = os.environ.get(ENV)
    if not directory:
        return
    path = Path(directory) / f"calls-py-{os.getpid()}.jsonl"

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        operation = model.name
        line = {
            "role": ROLE,
            "template": TEMPLATE,
            "action": ACTIONS.get(operation, "s3:unknown"),
            "operation": operation,
            "resource": f"Sub:arn:${{AWS::Partition}}:s3:::{BUCKET}/{relative(str(params.get('Key', '')), prefix)}",
            "site": _site(),
        }
        with _lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as f:
                f.write(json.dumps(line) + "\n")

    client.meta.events.register("before-parameter-build.s3", record)


def relative(key: str, prefix: str) -> str:
    """``key`` without the store's ``prefix``, a ``runs/`` key's run and step ids and attempt
    number as placeholders (the decision depends on the layout, not on the ids). A key outside
    the prefix stays whole: the check sees it outside ``runs/`` and denies it."""
    if prefix:
        if not key.startswith(prefix + "/"):
            return key
        key = key[len(prefix) + 1:]
    segments = key.split("/")
    if segments[0] == "runs":
        for i, name in ((1, "{run}"), (2, "{step}")):
            if len(segments) > i and _UUID.fullmatch(segments[i]):
                segments[i] = name
        if len(segments) > 3:
            digits = re.match(r"\d*", segments[3]).group()  # type: ignore[union-attr]
            if digits:
                segments[3] = "{attempt}" + segments[3][len(digits):]
    return "/".join(segments)


def _site() -> str:
    """The innermost frame of this package's code that is not this module: where the call
    was asked for. The transfer manager's worker threads (a multipart upload's parts) have
    none: their calls are the store's upload."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(_PACKAGE) and not name.endswith("call_log.py"):
            return f"rara_worker/{os.path.relpath(name, _PACKAGE)}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return "rara_worker/store.py S3Store.put (a transfer manager thread)"
