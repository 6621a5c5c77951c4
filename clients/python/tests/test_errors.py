"""One typed error per API error code, each provoked on a live ``rara ui`` where a healthy local
server can give it, else read from a loopback server answering the exact body the API gives."""

from __future__ import annotations

import uuid
import pytest

from rara_client import (
    ApiError,
    BadRequestError,
    Client,
    ConflictError,
    ConnectionFailedError,
    ForbiddenError,
    InternalError,
    InvalidPayloadError,
    InvalidWorkflowError,
    MisdirectedError,
    NotFoundError,
    NotWaitingError,
    PayloadTooLargeError,
    RerunRefusedError,
    Retry,
    SecretNotGrantedError,
    TooManyError,
    UnauthorizedError,
    UnavailableError,
    UnexpectedResponseError,
    UnsupportedMediaTypeError,
)
from rara_client._calls import Call
from rara_client._http import read
from rara_client.errors import ERRORS

from .replay import replaying
from .stack import Stack

NOOP = {"name": "errors", "steps": [{"name": "a", "operation": "noop"}]}
FAST = Retry(attempts=3, initial_delay=0.01, max_delay=0.02)


def test_every_code_the_server_names_has_its_class() -> None:
    documented = {"bad_request", "unauthorized", "forbidden", "not_found", "misdirected", "invalid_workflow",
                  "conflict", "payload_too_large", "unsupported_media_type", "internal", "unavailable",
                  "too_many", "invalid_payload", "not_waiting", "rerun_refused", "SECRET_NOT_GRANTED"}
    assert set(ERRORS) == documented


def test_bad_request(client: Client) -> None:
    with pytest.raises(BadRequestError) as e:
        client.list_runs(cursor="not-a-cursor")
    assert (e.value.code, e.value.field, e.value.exit_code, e.value.status) == ("bad_request", "cursor", 2, 400)


def test_unauthorized(stack: Stack) -> None:
    with Client(stack.url, token="wrong") as anonymous, pytest.raises(UnauthorizedError) as e:
        anonymous.submit(NOOP)
    assert (e.value.status, e.value.exit_code) == (401, 1)


def test_not_found(client: Client) -> None:
    with pytest.raises(NotFoundError) as e:
        client.get_run(str(uuid.uuid4()))
    assert (e.value.status, e.value.exit_code) == (404, 3)


def test_misdirected(stack: Stack) -> None:
    with Client(stack.url, token=stack.token) as rara:
        rara._http.headers["host"] = "rebound.example"
        with pytest.raises(MisdirectedError) as e:
            rara.get_run(str(uuid.uuid4()))
    assert e.value.status == 421


def test_invalid_workflow(client: Client) -> None:
    bad = {"name": "bad", "steps": [{"name": "a", "operation": "noop", "depends_on": ["zz"]}]}
    with pytest.raises(InvalidWorkflowError) as e:
        client.submit(bad)
    assert (e.value.field, e.value.exit_code, e.value.status) == ("definition.steps[0].depends_on[0]", 4, 422)


def test_conflict(client: Client) -> None:
    client.register({"name": "conflicting", "steps": [{"name": "a", "operation": "noop"}]})
    client.create_schedule("taken", "conflicting", every_seconds=3600)
    with pytest.raises(ConflictError) as e:
        client.create_schedule("taken", "conflicting", every_seconds=3600)
    assert (e.value.field, e.value.status) == ("name", 409)


def test_payload_too_large(client: Client) -> None:
    big = {"name": "big", "steps": [{"name": "a", "operation": "noop", "input": {"x": "y" * 3_000_000}}]}
    with pytest.raises(PayloadTooLargeError) as e:
        client.submit(big)
    assert (e.value.status, e.value.exit_code) == (413, 2)


def test_unsupported_media_type(client: Client) -> None:
    response = client._http.post("/api/runs", content=b"{}", headers={"content-type": "text/plain"})
    with pytest.raises(UnsupportedMediaTypeError) as e:
        read(Call("POST", "/api/runs", lambda v: v), response)
    assert e.value.status == 415


def test_not_waiting_and_invalid_payload(client: Client) -> None:
    run = client.submit(NOOP)
    with pytest.raises(NotWaitingError) as e:
        client.signal(run["id"], "approve", {"ok": True})
    assert (e.value.status, e.value.exit_code) == (409, 9)

    waiting = {"name": "approval", "steps": [{"name": "approve", "wait": {
        "signal": "approve", "accept_early": True, "schema": {"type": "object", "required": ["approved_by"]}}}]}
    run = client.submit(waiting)
    with pytest.raises(InvalidPayloadError) as invalid:
        client.signal(run["id"], "approve", {"nobody": 1})
    assert (invalid.value.status, invalid.value.exit_code) == (422, 2)
    assert invalid.value.field is not None and invalid.value.field.startswith("data")
    assert client.signal(run["id"], "approve", {"approved_by": "me"}, signal_id="s1")["delivery"] in ("kept",
                                                                                                   "delivered")


def test_rerun_refused(client: Client) -> None:
    run = client.submit(NOOP)
    with pytest.raises(RerunRefusedError) as e:
        client.rerun(run["id"], "no-such-step")
    assert (e.value.status, e.value.exit_code) == (409, 10)


def test_secret_not_granted(client: Client) -> None:
    secret = {"name": "secretive", "steps": [{"name": "a", "operation": "noop",
                                              "input": {"key": {"$secret": "never-granted"}}}]}
    with pytest.raises(SecretNotGrantedError) as e:
        client.submit(secret)
    assert (e.value.status, e.value.field) == (403, "definition.steps[0].input.key")


@pytest.mark.parametrize(("status", "code", "cls"), [
    (403, "forbidden", ForbiddenError),
    (422, "too_many", TooManyError),
    (500, "internal", InternalError),
    (503, "unavailable", UnavailableError),
    (418, "teapot", ApiError),
])
def test_answers_a_local_server_cannot_give(status: int, code: str, cls: type[ApiError]) -> None:
    body = {"code": code, "message": "m", "field": "f", "exit_code": 7}
    with replaying(status, body) as replay, Client(replay.url, token="t", retry=FAST) as rara:
        with pytest.raises(cls) as e:
            rara.cancel(str(uuid.uuid4()))
    assert type(e.value) is cls
    assert (e.value.code, e.value.field, e.value.exit_code, e.value.status) == (code, "f", 7, status)


def test_a_5xx_is_retried_for_idempotent_calls_only() -> None:
    body = {"code": "unavailable", "message": "try again", "field": None, "exit_code": 1}
    with replaying(503, body) as replay, Client(replay.url, token="t", retry=FAST) as rara:
        with pytest.raises(UnavailableError):
            rara.get_run("x")
        assert len(replay.requests) == 3, "a read is sent again"
        replay.requests.clear()
        with pytest.raises(UnavailableError):
            rara.submit(NOOP)
        assert len(replay.requests) == 1, "a submit without a key is not"
        replay.requests.clear()
        with pytest.raises(UnavailableError):
            rara.submit(NOOP, idempotency_key="k")
        assert len(replay.requests) == 3, "a submit with a key is"


def test_a_connection_refused_is_retried_then_typed() -> None:
    with replaying(200, {}) as replay:
        url = replay.url
    with Client(url, token="t", retry=FAST) as rara, pytest.raises(ConnectionFailedError):
        rara.submit(NOOP)


def test_an_answer_that_is_not_the_apis() -> None:
    with replaying(502, b"<html>bad gateway</html>") as replay, Client(replay.url, retry=FAST) as rara:
        with pytest.raises(UnexpectedResponseError) as e:
            rara.list_runs()
    assert e.value.status == 502
