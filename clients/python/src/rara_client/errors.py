"""Typed errors: one class per API error ``code``.

Every error the API answers is ``{"code", "message", "field", "exit_code"}`` with a 4xx or
5xx status (``shared/api/src/error.rs``); :func:`error_from` turns one into the class of its
code, which carries the same ``field`` and the ``exit_code`` ``rara`` exits with for the same
failure. A code this client does not know is a plain :class:`ApiError`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .types import Problem


class RaraError(Exception):
    """Anything this client raises."""


class ApiError(RaraError):
    """An error the API answered; subclasses are one per ``code``."""

    #: The ``code`` this class stands for.
    CODE: ClassVar[str] = ""

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        field: str | None = None,
        exit_code: int = 1,
        status: int = 0,
        body: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{message} (field {field})" if field else message)
        self.message = message
        self.field = field
        self.exit_code = exit_code
        self.status = status
        self.body = body or {}
        #: The ``code`` the server sent (for a plain :class:`ApiError`, one not known here).
        self.code: str = code if code is not None else type(self).CODE


class BadRequestError(ApiError):
    """Malformed JSON, an unknown field, a bad cursor or limit (400, exit 2)."""

    CODE = "bad_request"


class UnauthorizedError(ApiError):
    """No token or session where one is needed (401)."""

    CODE = "unauthorized"


class ForbiddenError(ApiError):
    """An admitted caller that may not do this (403)."""

    CODE = "forbidden"


class NotFoundError(ApiError):
    """No such run, step, workflow, schedule or artifact (404, exit 3)."""

    CODE = "not_found"


class MisdirectedError(ApiError):
    """A ``Host`` the server does not answer to (421)."""

    CODE = "misdirected"


class ConflictError(ApiError):
    """The state does not allow it: nothing to retry, a schedule name taken (409)."""

    CODE = "conflict"


class InvalidWorkflowError(ApiError):
    """The definition is invalid (422, exit 4); ``field`` is its path, ``problems`` all of them."""

    CODE = "invalid_workflow"

    def __init__(self, message: str, *, problems: list[Problem] | None = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.problems: list[Problem] = problems or []


class PayloadTooLargeError(ApiError):
    """A body over the server's limit (413, exit 2)."""

    CODE = "payload_too_large"


class UnsupportedMediaTypeError(ApiError):
    """A body that is not ``application/json`` (415, exit 2)."""

    CODE = "unsupported_media_type"


class TooManyError(ApiError):
    """A bulk action matched more than it may change (422, exit 2)."""

    CODE = "too_many"


class InvalidPayloadError(ApiError):
    """A signal or event payload that the wait's schema refuses (422, exit 2)."""

    CODE = "invalid_payload"


class NotWaitingError(ApiError):
    """A signal to a run with no step waiting for it (409, exit 9)."""

    CODE = "not_waiting"


class RerunRefusedError(ApiError):
    """A rerun the run's state refuses (409, exit 10)."""

    CODE = "rerun_refused"


class SecretNotGrantedError(ApiError):
    """A step names a secret not granted to its workflow (403)."""

    CODE = "SECRET_NOT_GRANTED"


class InternalError(ApiError):
    """The server failed (500)."""

    CODE = "internal"


class UnavailableError(ApiError):
    """The database or the artifact store is unavailable; try again (503)."""

    CODE = "unavailable"


class UnexpectedResponseError(RaraError):
    """An answer that is not the API's: not JSON, or a status no route gives (a proxy's 502)."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class WatchError(RaraError):
    """A watch that could not reach the server within its reconnect budget."""


ERRORS: dict[str, type[ApiError]] = {
    cls.CODE: cls
    for cls in (
        BadRequestError,
        UnauthorizedError,
        ForbiddenError,
        NotFoundError,
        MisdirectedError,
        ConflictError,
        InvalidWorkflowError,
        PayloadTooLargeError,
        UnsupportedMediaTypeError,
        TooManyError,
        InvalidPayloadError,
        NotWaitingError,
        RerunRefusedError,
        SecretNotGrantedError,
        InternalError,
        UnavailableError,
    )
}


def error_from(status: int, body: object) -> RaraError:
    """The typed error for an error answer's ``status`` and parsed JSON ``body``."""
    if not isinstance(body, dict) or not isinstance(body.get("code"), str):
        return UnexpectedResponseError(f"HTTP {status}: not an API error body", status=status)
    code = body["code"]
    message = str(body.get("message", ""))
    field = body["field"] if isinstance(body.get("field"), str) else None
    exit_code = body["exit_code"] if isinstance(body.get("exit_code"), int) else 1
    cls = ERRORS.get(code, ApiError)
    return cls(message, code=code, field=field, exit_code=exit_code, status=status, body=body)


class ConnectionFailedError(RaraError):
    """The server could not be reached (after the retries the call allows)."""
