"""What the sync and async clients share around a request: auth, the retry policy, reading an
answer into a value or a typed error."""

from __future__ import annotations

import os
import random
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import httpx

from ._calls import Call, T
from .errors import RaraError, UnexpectedResponseError, error_from

#: The token ``rara ui`` prints; ``rara --api`` reads it from the same variable.
TOKEN_VAR = "RARA_API_TOKEN"
#: The API's base URL, as ``rara --api`` reads it.
URL_VAR = "RARA_API_URL"
USER_AGENT = "rara-client-python/0.1"


@dataclass(frozen=True)
class Retry:
    """Retries with exponential backoff and full jitter: a connection refused for any call
    (nothing was sent), a 5xx, a 429 or a connection lost mid-request for idempotent calls only."""

    attempts: int = 4
    initial_delay: float = 0.2
    max_delay: float = 5.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait before the retry after ``attempt`` (1-based) failed."""
        return random.uniform(0, min(self.max_delay, self.initial_delay * 2 ** (attempt - 1)))

    def on_status(self, call: Call[Any], status: int, attempt: int) -> bool:
        return attempt < self.attempts and call.idempotent and (status >= 500 or status == 429)

    def on_error(self, call: Call[Any], error: httpx.TransportError, attempt: int) -> bool:
        if attempt >= self.attempts:
            return False
        return call.idempotent or isinstance(error, (httpx.ConnectError, httpx.ConnectTimeout))


class SigV4(httpx.Auth):
    """Signs each request with SigV4 (an IAM function URL: service ``lambda``) from botocore's
    default credential chain. Needs ``pip install rara-client[sigv4]``."""

    requires_request_body = True

    def __init__(self, region: str | None = None, service: str = "lambda") -> None:
        try:
            import botocore.session
            from botocore.auth import SigV4Auth
        except ImportError as e:  # pragma: no cover - depends on what is installed
            raise RaraError("SigV4 needs botocore: pip install 'rara-client[sigv4]'") from e
        session = botocore.session.get_session()
        credentials = session.get_credentials()
        if credentials is None:
            raise RaraError("SigV4: no AWS credentials found (botocore's default chain)")
        region = region or session.get_config_variable("region") or os.environ.get("AWS_REGION")
        if not region:
            raise RaraError("SigV4: no region (pass region= or set AWS_REGION)")
        self._signer = SigV4Auth(credentials, service, region)

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        from botocore.awsrequest import AWSRequest

        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("connection", "user-agent")}
        aws = AWSRequest(method=request.method, url=str(request.url), data=request.content, headers=headers)
        self._signer.add_auth(aws)
        request.headers.update(dict(aws.headers.items()))
        yield request


def settings(url: str | None, token: str | None) -> tuple[str, dict[str, str]]:
    """The base URL and the default headers, from the arguments or the environment."""
    base = url or os.environ.get(URL_VAR)
    if not base:
        raise RaraError(f"no API URL: pass url= or set {URL_VAR}")
    headers = {"user-agent": USER_AGENT, "accept": "application/json"}
    token = token if token is not None else os.environ.get(TOKEN_VAR)
    if token:
        headers["authorization"] = f"Bearer {token}"
    return base.rstrip("/"), headers


def request_args(call: Call[Any]) -> dict[str, Any]:
    args: dict[str, Any] = {"params": call.params or None}
    if call.body is not None:
        args["json"] = call.body
    elif call.method == "POST":
        args["json"] = {}
    return args


def read(call: Call[T], response: httpx.Response) -> T:
    """The answer's value, or the typed error of an error answer."""
    if response.status_code >= 400:
        raise error_from(response.status_code, _json_or_none(response))
    if response.status_code == 204 or not response.content:
        return call.parse(None)
    body = _json_or_none(response)
    if body is None:
        raise UnexpectedResponseError(f"HTTP {response.status_code}: the answer is not JSON", status=response.status_code)
    return call.parse(body)


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None
