"""``Attach``: which requests may resume an attempt's events, and from where.

``open_attach(table, request)`` checks, in this order, and raises ``Refused`` with the
gRPC status the contract gives:

1. ``INVALID_ARGUMENT``: ``step_id`` is not a UUID, or ``attempt`` is 0;
2. ``NOT_FOUND``: no such attempt here (never started here, the executor restarted, or it
   ended longer ago than the retention);
3. ``PERMISSION_DENIED``: ``attempt_secret`` is not the secret the attempt's ``Execute``
   declared (compared in constant time; nothing is acknowledged or streamed);
4. ``FAILED_PRECONDITION``: the attempt cannot detach (``ExecuteRequest.detachable`` was
   false, or its capability opts out); ``fence`` differs from the attempt's (older: a
   stale holder; newer: the attempt ran under another claim); a newer attempt of the step
   superseded it (its fence is stale); ``after_sequence`` is beyond the last event
   produced, or below events an earlier ``Attach`` already acknowledged (they are gone,
   and the contract allows no gap).

Otherwise the events up to ``after_sequence`` are acknowledged (dropped), the attempt's
previous reader, if any, ends (superseded), and the returned iterator yields every kept
event after ``after_sequence``, then live events up to the terminal one.
"""

from __future__ import annotations

import uuid

import grpc

from rara.v1 import executor_pb2 as pb
from rara_worker.attempt import Attempt
from rara_worker.attempts import AttemptTable
from rara_worker.log import Reader


class Refused(Exception):
    """An ``Attach`` the executor refuses, with the gRPC status to answer."""

    def __init__(self, status: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def open_attach(
    table: AttemptTable, request: pb.AttachRequest
) -> tuple[Attempt, Reader]:
    """The attempt and a reader of its events after ``request.after_sequence``."""
    try:
        uuid.UUID(request.step_id)
    except ValueError:
        raise Refused(grpc.StatusCode.INVALID_ARGUMENT, "step_id must be a UUID") from None
    if request.attempt < 1:
        raise Refused(grpc.StatusCode.INVALID_ARGUMENT, "attempt must be at least 1")
    attempt = table.get(request.step_id, request.attempt)
    if attempt is None:
        raise Refused(
            grpc.StatusCode.NOT_FOUND,
            f"attempt {request.attempt} of step {request.step_id} is not known here: it never "
            "ran here, the executor restarted, or it ended longer ago than the retention",
        )
    if not attempt.admits_secret(request.attempt_secret):
        raise Refused(
            grpc.StatusCode.PERMISSION_DENIED, "attempt_secret is not this attempt's secret"
        )
    _check(attempt, request)
    attempt.log.acknowledge(request.after_sequence)
    return attempt, attempt.log.attach(request.after_sequence)


def _check(attempt: Attempt, request: pb.AttachRequest) -> None:
    precondition = grpc.StatusCode.FAILED_PRECONDITION
    if not attempt.detachable:
        raise Refused(
            precondition,
            "the attempt is not detachable (started with detachable=false, or its "
            "capability opts out); only its Execute stream reads it",
        )
    if attempt.superseded_by is not None:
        newer, newer_fence = attempt.superseded_by
        raise Refused(
            precondition,
            f"fence {request.fence} is stale: attempt {newer} (fence {newer_fence}) of this "
            "step superseded this attempt",
        )
    if request.fence < attempt.fence:
        raise Refused(
            precondition,
            f"fence {request.fence} is older than the attempt's fence {attempt.fence}: "
            "a newer holder owns it",
        )
    if request.fence > attempt.fence:
        raise Refused(
            precondition,
            f"fence {request.fence} is not the attempt's fence {attempt.fence}: the attempt "
            "runs under an older claim",
        )
    last = attempt.log.last_sequence
    if request.after_sequence > last:
        raise Refused(
            precondition,
            f"after_sequence {request.after_sequence} is beyond the last event sent ({last})",
        )
    acknowledged = attempt.log.acknowledged
    if request.after_sequence < acknowledged:
        raise Refused(
            precondition,
            f"after_sequence {request.after_sequence} is below events already acknowledged "
            f"(up to {acknowledged}); they are no longer kept",
        )
