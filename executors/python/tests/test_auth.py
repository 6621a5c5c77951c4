"""Who may call the executor: bearer tokens before any handler, TLS, and attempt secrets."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from support import attach_request, kinds, make_registry, read_until, request

from rara.v1 import executor_pb2 as pb
from rara.v1 import executor_pb2_grpc as pb_grpc
from rara_worker.auth import TlsFiles, Tokens
from rara_worker.server import RunningServer, start

TOKEN = "current-token-0123456789"
NEXT = "next-token-abcdefghijklmn"
TLS_DIR = Path(__file__).resolve().parents[3] / "shared" / "remote" / "tests" / "fixtures" / "tls"
SECRET = "a" * 64


def bearer(token: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {token}"),)


@pytest.fixture
async def guarded(
    tmp_path: Path, data_dir: Path, cancel_seen: list[str]
) -> AsyncIterator[RunningServer]:
    running = await start(
        make_registry(cancel_seen, data_dir), artifacts_dir=tmp_path / "artifacts",
        tokens=Tokens([TOKEN, NEXT]),
    )
    yield running
    await running.stop(grace=0.5)


@pytest.fixture
async def channel(guarded: RunningServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(guarded.address) as channel:
        yield channel


def secured(req: pb.ExecuteRequest, secret: str = SECRET, prior: list[str] | None = None) -> pb.ExecuteRequest:
    req.attempt_secret = secret
    req.prior_attempt_secrets.extend(prior or [])
    return req


async def test_calls_without_a_valid_token_are_unauthenticated_before_any_handler_runs(
    guarded: RunningServer, channel: grpc.aio.Channel, caplog: pytest.LogCaptureFixture
) -> None:
    stub = pb_grpc.ExecutorServiceStub(channel)
    caplog.set_level(logging.INFO)
    req = secured(request("probe.cancellable", detachable=True))
    for metadata in [(), bearer("not-a-token-of-this-server"), (("authorization", TOKEN),)]:
        with pytest.raises(grpc.aio.AioRpcError) as execute:
            [e async for e in stub.Execute(req, metadata=metadata)]
        with pytest.raises(grpc.aio.AioRpcError) as attach:
            [e async for e in stub.Attach(attach_request(req, 0), metadata=metadata)]
        with pytest.raises(grpc.aio.AioRpcError) as cancel:
            await stub.Cancel(pb.CancelRequest(step_id=req.step_id, attempt=1), metadata=metadata)
        with pytest.raises(grpc.aio.AioRpcError) as capabilities:
            await stub.GetCapabilities(pb.GetCapabilitiesRequest(), metadata=metadata)
        codes = {c.value.code() for c in (execute, attach, cancel, capabilities)}
        assert codes == {grpc.StatusCode.UNAUTHENTICATED}, codes
    assert guarded.interceptor is not None and guarded.interceptor.refused == 12
    assert guarded.service.attempts.running() == [], "no handler ran: no attempt exists"
    handler_lines = [r.getMessage() for r in caplog.records
                     if r.getMessage().startswith(("execute ", "attach ", "cancel "))]
    assert handler_lines == [], handler_lines
    refusals = [r.getMessage() for r in caplog.records if "unauthenticated call refused" in r.getMessage()]
    assert len(refusals) == 12 and not any(TOKEN in line for line in refusals), refusals
    # Health stays open to load balancers and rara's drain check.
    health = health_pb2_grpc.HealthStub(channel)
    answer = await health.Check(health_pb2.HealthCheckRequest(service="rara.v1.ExecutorService"))
    assert answer.status == health_pb2.HealthCheckResponse.SERVING


async def test_both_tokens_of_a_rotation_are_accepted(channel: grpc.aio.Channel) -> None:
    stub = pb_grpc.ExecutorServiceStub(channel)
    for token in (TOKEN, NEXT):
        answer = await stub.GetCapabilities(pb.GetCapabilitiesRequest(), metadata=bearer(token))
        assert answer.capabilities


async def test_a_forger_with_the_token_but_not_the_secret_cannot_touch_the_attempt(
    guarded: RunningServer, channel: grpc.aio.Channel, cancel_seen: list[str]
) -> None:
    stub = pb_grpc.ExecutorServiceStub(channel)
    meta = bearer(TOKEN)
    legit = secured(request("probe.ticks", '{"ticks": 3, "interval": 0.2}', fence=10, detachable=True))
    call = stub.Execute(legit, metadata=meta)
    await read_until(call, lambda e: e.WhichOneof("event") == "progress")

    # A larger fence for the same step, without the running attempt's secret: no supersede.
    forged = secured(request("probe.cancellable", step_id=legit.step_id, attempt=2, fence=10_000),
                     secret="f" * 64, prior=["0" * 64])
    forged_call = stub.Execute(forged, metadata=meta)
    await read_until(forged_call, lambda e: e.WhichOneof("event") == "running")
    # Attach and Cancel with a wrong secret are refused and change nothing.
    with pytest.raises(grpc.aio.AioRpcError) as attach:
        [e async for e in stub.Attach(attach_request(legit, 0), metadata=meta)]
    assert attach.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.aio.AioRpcError) as cancel:
        await stub.Cancel(pb.CancelRequest(step_id=legit.step_id, attempt=1, attempt_secret="b" * 64),
                          metadata=meta)
    assert cancel.value.code() == grpc.StatusCode.PERMISSION_DENIED

    rest = [e async for e in call]
    assert kinds(rest)[-1] == "succeeded", kinds(rest)
    assert sum(1 for e in rest if e.WhichOneof("event") == "succeeded") == 1
    legit_attempt = guarded.service.attempts.get(legit.step_id, 1)
    assert legit_attempt is not None and legit_attempt.superseded_by is None
    forged_call.cancel()

    # rara's own next attempt is not made stale by the forged one's larger fence.
    nxt = secured(request("sync.echo", '{"x": 1}', step_id=legit.step_id, attempt=3, fence=11),
                  secret="c" * 64, prior=[SECRET, "d" * 64])
    events = [e async for e in stub.Execute(nxt, metadata=meta)]
    assert kinds(events)[-1] == "succeeded", events[-1]


async def test_the_holder_with_the_secrets_supersedes_attaches_and_cancels(
    guarded: RunningServer, channel: grpc.aio.Channel
) -> None:
    stub = pb_grpc.ExecutorServiceStub(channel)
    meta = bearer(TOKEN)
    first = secured(request("probe.cancellable", fence=10, detachable=True))
    call = stub.Execute(first, metadata=meta)
    await read_until(call, lambda e: e.WhichOneof("event") == "running")
    attach = attach_request(first, 0)
    attach.attempt_secret = SECRET
    events = await read_until(stub.Attach(attach, metadata=meta), lambda e: e.WhichOneof("event") == "running")
    assert kinds(events) == ["accepted", "running"]

    second = secured(request("probe.cancellable", step_id=first.step_id, attempt=2, fence=11, detachable=True),
                     secret="e" * 64, prior=[SECRET])
    second_call = stub.Execute(second, metadata=meta)
    await read_until(second_call, lambda e: e.WhichOneof("event") == "running")
    old = guarded.service.attempts.get(first.step_id, 1)
    assert old is not None and old.superseded_by == (2, 11)
    answer = await stub.Cancel(
        pb.CancelRequest(step_id=first.step_id, attempt=2, attempt_secret="e" * 64, reason="operator"),
        metadata=meta,
    )
    assert answer.found
    rest = [e async for e in second_call]
    assert kinds(rest)[-1] == "cancelled" and rest[-1].cancelled.reason == "operator"
    # A replay of the first attempt is stale: the second (retained) vouched for it.
    replay = secured(request("sync.echo", step_id=first.step_id, attempt=1, fence=10))
    events = [e async for e in stub.Execute(replay, metadata=meta)]
    assert events[-1].failed.error.code == "STALE_FENCE", events[-1]
    call.cancel()


async def test_tls_with_a_private_ca_and_client_certificates(
    tmp_path: Path, data_dir: Path, cancel_seen: list[str]
) -> None:
    tls = TlsFiles(TLS_DIR / "server.pem", TLS_DIR / "server.key", TLS_DIR / "ca.pem")
    running = await start(make_registry(cancel_seen, data_dir), artifacts_dir=tmp_path / "a",
                          tokens=Tokens([TOKEN]), tls=tls)
    address = f"localhost:{running.port}"
    try:
        ca = (TLS_DIR / "ca.pem").read_bytes()
        client = ((TLS_DIR / "client.key").read_bytes(), (TLS_DIR / "client.pem").read_bytes())
        good = grpc.ssl_channel_credentials(ca, *client)
        async with grpc.aio.secure_channel(address, good) as channel:
            answer = await pb_grpc.ExecutorServiceStub(channel).GetCapabilities(
                pb.GetCapabilitiesRequest(), metadata=bearer(TOKEN))
            assert answer.capabilities
        wrong_ca = grpc.ssl_channel_credentials((TLS_DIR / "wrong-ca.pem").read_bytes(), *client)
        no_client_cert = grpc.ssl_channel_credentials(ca)
        for credentials in (wrong_ca, no_client_cert):
            async with grpc.aio.secure_channel(address, credentials) as channel:
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await pb_grpc.ExecutorServiceStub(channel).GetCapabilities(
                        pb.GetCapabilitiesRequest(), metadata=bearer(TOKEN), timeout=5)
                assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        await running.stop(grace=0.1)


async def test_the_process_refuses_to_start_without_a_token(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "RARA_EXECUTOR_TOKENS"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rara_worker", "--port", "0", "--artifacts-dir", str(tmp_path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )
    _, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    assert proc.returncode == 2 and b"no token: set RARA_EXECUTOR_TOKENS" in err, err


def test_tokens_come_from_the_environment_and_a_file_and_never_print(tmp_path: Path) -> None:
    file = tmp_path / "tokens"
    file.write_text(f"# rotation\n{NEXT}\n")
    tokens = Tokens.load(env=f" {TOKEN} ,", file=file)
    assert len(tokens) == 2 and TOKEN not in repr(tokens)
    assert tokens.accepts(f"Bearer {NEXT}") and not tokens.accepts(NEXT)
    with pytest.raises(ValueError, match="at least 16"):
        Tokens(["short"])


async def test_a_retained_attempt_is_replaced_only_under_its_own_secret(channel: grpc.aio.Channel) -> None:
    stub = pb_grpc.ExecutorServiceStub(channel)
    meta = bearer(TOKEN)
    first = secured(request("probe.ticks", '{"ticks": 1}', detachable=True))
    assert kinds([e async for e in stub.Execute(first, metadata=meta)])[-1] == "succeeded"
    again = secured(request("sync.echo", step_id=first.step_id, fence=first.fence), secret="9" * 64)
    events = [e async for e in stub.Execute(again, metadata=meta)]
    assert events[-1].failed.error.code == "ATTEMPT_SECRET_MISMATCH", events[-1]
    attach = attach_request(first, 0)
    attach.attempt_secret = SECRET
    replayed = [e async for e in stub.Attach(attach, metadata=meta)]
    assert kinds(replayed)[-1] == "succeeded", "the retained attempt is still there"
