"""Who may call this executor, and over what (``rara.v1``'s "Authentication").

- ``Tokens``: the bearer tokens accepted (two at once during a rotation), from the
  environment variable ``RARA_EXECUTOR_TOKENS`` (comma-separated) and/or a file (one token
  per line, ``#`` comments). Compared in constant time, every accepted token each time.
- ``TokenInterceptor``: refuses every ``rara.v1.ExecutorService`` call without
  ``authorization: Bearer <accepted token>`` with ``UNAUTHENTICATED`` before its handler
  runs, and logs the method (never the token). ``grpc.health.v1.Health`` stays open.
- ``TlsFiles``: the server certificate and key (``--tls-cert``/``--tls-key``) and an optional
  client CA (``--tls-client-ca``: clients must then present a certificate it signed, mTLS).
- ``secrets_match``: the constant-time comparison of attempt secrets.
"""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc

log = logging.getLogger(__name__)

TOKENS_ENV = "RARA_EXECUTOR_TOKENS"
"""Comma-separated accepted tokens (the name deployments inject)."""
_PROTECTED_PREFIX = "/rara.v1.ExecutorService/"
_MIN_TOKEN_CHARS = 16
if TYPE_CHECKING:
    _Handler = grpc.RpcMethodHandler[Any, Any]


def secrets_match(presented: str, declared: str) -> bool:
    """Whether two secrets are equal, in time that does not depend on where they differ."""
    return hmac.compare_digest(presented.encode(), declared.encode())


class Tokens:
    """The accepted bearer tokens; none accepted means the server refuses to be built."""

    def __init__(self, tokens: Iterable[str]) -> None:
        self._tokens = tuple(dict.fromkeys(t.strip() for t in tokens if t.strip()))
        for token in self._tokens:
            if len(token) < _MIN_TOKEN_CHARS or not token.isprintable() or " " in token:
                raise ValueError(
                    f"every token must be at least {_MIN_TOKEN_CHARS} printable characters "
                    "without spaces (the value is not shown)"
                )

    @classmethod
    def load(cls, env: str | None = None, file: Path | None = None) -> Tokens:
        """The tokens of ``RARA_EXECUTOR_TOKENS`` (``env`` overrides it) and of ``file``."""
        value = os.environ.get(TOKENS_ENV, "") if env is None else env
        tokens = value.split(",")
        if file is not None:
            lines = file.read_text(encoding="utf-8").splitlines()
            tokens += [line for line in lines if not line.lstrip().startswith("#")]
        return cls(tokens)

    def __len__(self) -> int:
        return len(self._tokens)

    def __repr__(self) -> str:
        return f"Tokens(<{len(self._tokens)} redacted>)"

    def accepts(self, header: str | None) -> bool:
        """Whether ``header`` is ``Bearer <an accepted token>``; every token is compared."""
        if header is None or not header.startswith("Bearer "):
            return False
        presented = header[len("Bearer "):].encode()
        ok = False
        for token in self._tokens:
            ok |= hmac.compare_digest(presented, token.encode())
        return ok


class TokenInterceptor(grpc.aio.ServerInterceptor):
    """Refuses unauthenticated calls of ``rara.v1.ExecutorService`` before any handler runs."""

    def __init__(self, tokens: Tokens) -> None:
        self._tokens = tokens
        #: Calls refused so far (tests read it).
        self.refused = 0

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[_Handler | None]],
        details: grpc.HandlerCallDetails,
    ) -> _Handler | None:
        method: str = details.method
        if not method.startswith(_PROTECTED_PREFIX):
            return await continuation(details)
        header = next((str(v) for k, v in (details.invocation_metadata or ()) if k == "authorization"), None)
        if self._tokens.accepts(header):
            return await continuation(details)
        self.refused += 1
        log.warning(
            "unauthenticated call refused method=%s credential=%s",
            method, "absent" if header is None else "not accepted",
        )
        handler = await continuation(details)
        return _refusal(handler)


def _refusal(handler: _Handler | None) -> _Handler:
    """A handler of the same shape as ``handler`` that only aborts with UNAUTHENTICATED."""

    async def abort(_request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, "a valid bearer token is required")

    async def abort_stream(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        await abort(request, context)
        yield  # pragma: no cover (abort raises)

    decode = getattr(handler, "request_deserializer", None)
    encode = getattr(handler, "response_serializer", None)
    if handler is not None and handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(abort_stream, decode, encode)
    return grpc.unary_unary_rpc_method_handler(abort, decode, encode)


@dataclass(frozen=True)
class TlsFiles:
    """PEM files of the server's TLS: certificate chain, key, and an optional client CA."""

    cert: Path
    key: Path
    client_ca: Path | None = None

    def credentials(self) -> grpc.ServerCredentials:
        """Server credentials; with a client CA, clients must present a certificate it signed."""
        root = self.client_ca.read_bytes() if self.client_ca is not None else None
        return grpc.ssl_server_credentials(
            [(self.key.read_bytes(), self.cert.read_bytes())],
            root_certificates=root,
            require_client_auth=root is not None,
        )
