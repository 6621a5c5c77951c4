"""Exceptions handlers raise, and how any exception becomes a structured error.

A handler fails a step by raising:

- ``RetryableError(code, message, details)``: running the step again may succeed;
- ``PermanentError(code, message, details)``: it will not; the step fails for good;
- ``InvalidInputError(message, details)``: a ``PermanentError`` with code ``INVALID_INPUT``.

Any other exception is classified by ``to_error``:

==========================  ======================  =========
exception                   code                    retryable
==========================  ======================  =========
``TimeoutError``            ``TIMEOUT``             yes
``ConnectionError``         ``UNAVAILABLE``         yes
anything else               ``INTERNAL``            no
==========================  ======================  =========

The server itself reports ``DEADLINE_EXCEEDED`` (retryable) when the request's deadline
passes, ``UNKNOWN_OPERATION`` (not retryable) when no capability matches,
``INVALID_INPUT`` (not retryable) when the input is not a JSON object, and
``STALE_FENCE`` (not retryable) when an ``Execute`` carries an older fence than an
attempt of the same step this executor knows (a holder rara has replaced).
"""

from __future__ import annotations

from collections.abc import Mapping

from rara.v1 import executor_pb2 as pb

# Codes the server reports on its own.
INTERNAL = "INTERNAL"
TIMEOUT = "TIMEOUT"
UNAVAILABLE = "UNAVAILABLE"
DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
UNKNOWN_OPERATION = "UNKNOWN_OPERATION"
INVALID_INPUT = "INVALID_INPUT"
INVALID_REQUEST = "INVALID_REQUEST"
INVALID_OUTPUT = "INVALID_OUTPUT"
ALREADY_RUNNING = "ALREADY_RUNNING"
SHUTTING_DOWN = "SHUTTING_DOWN"
STALE_FENCE = "STALE_FENCE"
ATTEMPT_SECRET_MISMATCH = "ATTEMPT_SECRET_MISMATCH"

# Error messages are stored and shown to users; keep them bounded.
MAX_MESSAGE_CHARS = 2000


class StepError(Exception):
    """A classified step failure: a code, a message, a retryable flag, details."""

    retryable: bool = False

    def __init__(
        self, code: str, message: str, details: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details: dict[str, str] = dict(details or {})

    def to_proto(self) -> pb.Error:
        """This failure as a ``rara.v1.Error``."""
        return make_error(self.code, self.message, self.retryable, self.details)


class RetryableError(StepError):
    """Running the step again may succeed (a dependency is down, a rate limit hit)."""

    retryable = True


class PermanentError(StepError):
    """Running the step again will not succeed (bad input, a missing resource)."""

    retryable = False


class InvalidInputError(PermanentError):
    """The step's input is not what the capability accepts."""

    def __init__(self, message: str, details: Mapping[str, str] | None = None) -> None:
        super().__init__(INVALID_INPUT, message, details)


def make_error(
    code: str, message: str, retryable: bool, details: Mapping[str, str] | None = None
) -> pb.Error:
    """Build a ``rara.v1.Error``, bounding the message length."""
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[: MAX_MESSAGE_CHARS - 1] + "…"
    return pb.Error(code=code, message=message, retryable=retryable, details=dict(details or {}))


def to_error(exc: BaseException) -> pb.Error:
    """Classify any exception a handler raised (see the module's table)."""
    if isinstance(exc, StepError):
        return exc.to_proto()
    details = {"exception_type": type(exc).__name__}
    message = str(exc) or type(exc).__name__
    if isinstance(exc, TimeoutError):
        return make_error(TIMEOUT, message, True, details)
    if isinstance(exc, ConnectionError):
        return make_error(UNAVAILABLE, message, True, details)
    return make_error(INTERNAL, message, False, details)
