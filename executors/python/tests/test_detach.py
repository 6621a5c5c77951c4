"""Detachable attempts: they outlive their Execute stream and Attach resumes their events."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable

import grpc
import pytest
from support import (
    TERMINAL,
    assert_well_formed,
    attach_request,
    collect,
    eventually,
    gate,
    kinds,
    leave_after,
    read_until,
    request,
)

from rara.v1 import executor_pb2 as pb
from rara.v1 import executor_pb2_grpc as pb_grpc
from rara_worker.attempts import DetachConfig
from rara_worker.server import RunningServer

StartServer = Callable[[DetachConfig], Awaitable[tuple[RunningServer, pb_grpc.ExecutorServiceStub]]]


def is_running(event: pb.ExecuteResponse) -> bool:
    return event.HasField("running")


async def attach(stub: pb_grpc.ExecutorServiceStub, req: pb.AttachRequest) -> list[pb.ExecuteResponse]:
    return [e async for e in stub.Attach(req)]


async def attach_error(
    stub: pb_grpc.ExecutorServiceStub, req: pb.AttachRequest
) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await asyncio.wait_for(attach(stub, req), timeout=5)
    return refused.value


def assert_continues(
    seen: list[pb.ExecuteResponse], rest: list[pb.ExecuteResponse]
) -> list[pb.ExecuteResponse]:
    """``rest`` picks up right after ``seen`` and together they form one well-formed stream."""
    assert rest and rest[0].sequence == seen[-1].sequence + 1, (seen[-1], rest[:1])
    whole = seen + rest
    assert_well_formed(whole)
    return whole


async def test_capabilities_are_detachable_unless_the_registration_opts_out(
    stub: pb_grpc.ExecutorServiceStub,
) -> None:
    response = await stub.GetCapabilities(pb.GetCapabilitiesRequest())
    detachable = {c.name: c.detachable for c in response.capabilities}
    assert detachable["sleep"] and detachable["text.stats"] and detachable["probe.ticks"]
    assert detachable["probe.pinned"] is False


async def test_a_detached_attempt_runs_on_and_attach_resumes_after_the_last_seen_event(
    server: RunningServer, stub: pb_grpc.ExecutorServiceStub
) -> None:
    req = request("probe.ticks", json.dumps({"ticks": 20, "interval": 0.02}), detachable=True)
    seen = await leave_after(stub.Execute(req), lambda e: e.sequence == 4)
    assert kinds(seen) == ["accepted", "running", "progress", "progress"]
    attempt = server.service.attempts.get(req.step_id, req.attempt)
    assert attempt is not None
    await eventually(lambda: not attempt.log.attached)
    await asyncio.sleep(0.1)  # events are produced while nobody listens
    assert not attempt.ended and attempt.log.last_sequence > 4

    # The attached stream goes away too: the attempt still runs on.
    middle = await leave_after(
        stub.Attach(attach_request(req, after=seen[-1].sequence)), lambda e: e.sequence == 8
    )
    await eventually(lambda: not attempt.log.attached)
    rest = await attach(stub, attach_request(req, after=middle[-1].sequence))
    whole = assert_continues(seen, middle + rest)
    assert middle[0].sequence == 5 and rest[0].sequence == 9
    assert kinds(whole).count("progress") == 20
    assert json.loads(whole[-1].succeeded.output_json) == {"ticks": 20}


async def test_attach_after_the_attempt_finished_gets_its_outcome_again_and_again(
    server: RunningServer, stub: pb_grpc.ExecutorServiceStub
) -> None:
    req = request("probe.ticks", json.dumps({"ticks": 3, "delay": 0.1}), detachable=True)
    seen = await leave_after(stub.Execute(req), is_running)
    attempt = server.service.attempts.get(req.step_id, req.attempt)
    assert attempt is not None
    await eventually(lambda: attempt.ended)

    rest = await attach(stub, attach_request(req, after=2))
    whole = assert_continues(seen, rest)
    assert kinds(rest) == ["progress", "progress", "progress", "succeeded"]
    # The caller lost the outcome: a re-attach after the last progress gets it again.
    again = await attach(stub, attach_request(req, after=whole[-2].sequence))
    assert again == [whole[-1]]


async def test_a_finished_attempt_is_forgotten_after_the_retention(
    start_server: StartServer,
) -> None:
    _, stub = await start_server(DetachConfig(retention_seconds=0.3))
    req = request("sleep", '{"seconds": 0}', detachable=True)
    events = await collect(stub, req)
    assert events[-1].HasField("succeeded")
    within = await attach(stub, attach_request(req, after=events[-2].sequence))
    assert within == [events[-1]]

    await asyncio.sleep(0.5)
    error = await attach_error(stub, attach_request(req, after=events[-2].sequence))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert "retention" in (error.details() or "")


async def test_attach_to_an_attempt_never_seen_is_not_found(
    stub: pb_grpc.ExecutorServiceStub,
) -> None:
    error = await attach_error(stub, attach_request(request("sleep"), after=0))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert "not known here" in (error.details() or "")


@pytest.mark.parametrize(
    ("step_id", "attempt", "field"), [("not-a-uuid", 1, "step_id"), (None, 0, "attempt")]
)
async def test_attach_with_malformed_ids_is_invalid_argument(
    stub: pb_grpc.ExecutorServiceStub, step_id: str | None, attempt: int, field: str
) -> None:
    req = attach_request(request("sleep"), after=0)
    req.step_id = step_id or req.step_id
    req.attempt = attempt
    error = await attach_error(stub, req)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in (error.details() or "")


async def test_attach_with_another_fence_is_refused_and_the_attempt_runs_on(
    stub: pb_grpc.ExecutorServiceStub,
) -> None:
    req = request("sleep", '{"seconds": 30}', detachable=True)
    seen = await leave_after(stub.Execute(req), is_running)
    older = await attach_error(stub, attach_request(req, after=2, fence=req.fence - 1))
    assert older.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "older than the attempt's fence 42" in (older.details() or "")
    newer = await attach_error(stub, attach_request(req, after=2, fence=req.fence + 1))
    assert newer.code() == grpc.StatusCode.FAILED_PRECONDITION

    call = stub.Attach(attach_request(req, after=2))
    rest = await read_until(call, lambda e: e.HasField("progress"))
    assert rest[0].sequence == seen[-1].sequence + 1
    assert (await stub.Cancel(pb.CancelRequest(step_id=req.step_id, attempt=1))).found


async def test_attach_after_a_sequence_never_sent_is_refused(
    stub: pb_grpc.ExecutorServiceStub,
) -> None:
    req = request("sleep", '{"seconds": 30}', detachable=True)
    await leave_after(stub.Execute(req), is_running)
    error = await attach_error(stub, attach_request(req, after=1000))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "beyond the last event" in (error.details() or "")
    await stub.Cancel(pb.CancelRequest(step_id=req.step_id, attempt=1, reason="done"))


async def test_attach_before_events_already_acknowledged_is_refused(
    stub: pb_grpc.ExecutorServiceStub,
) -> None:
    req = request("probe.ticks", json.dumps({"ticks": 2, "delay": 0.1}), detachable=True)
    await leave_after(stub.Execute(req), is_running)
    events = await attach(stub, attach_request(req, after=2))
    assert kinds(events) == ["progress", "progress", "succeeded"]
    error = await attach_error(stub, attach_request(req, after=1))  # 2 was acknowledged
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "already acknowledged" in (error.details() or "")


async def test_cancel_reaches_a_detached_attempt_and_the_next_attach_gets_cancelled(
    stub: pb_grpc.ExecutorServiceStub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rara_worker")
    req = request("sleep", '{"seconds": 30}', detachable=True)
    seen = await leave_after(stub.Execute(req), lambda e: e.HasField("progress"))
    await asyncio.sleep(0.05)  # the server sees the stream go
    response = await stub.Cancel(
        pb.CancelRequest(step_id=req.step_id, attempt=req.attempt, reason="user asked")
    )
    assert response.found
    rest = await attach(stub, attach_request(req, after=seen[-1].sequence))
    whole = assert_continues(seen, rest)
    assert whole[-1].cancelled.reason == "user asked"
    assert f"cancel step={req.step_id} attempt=1 found=True reason='user asked'" in caplog.text


async def test_a_stream_that_goes_away_stops_an_attempt_that_cannot_detach(
    stub: pb_grpc.ExecutorServiceStub, cancel_seen: list[str]
) -> None:
    not_asked = request("probe.cancellable", detachable=False)
    opted_out = request("probe.pinned", detachable=True)  # the capability says no
    for req in (not_asked, opted_out):
        await leave_after(stub.Execute(req), is_running)
    await eventually(lambda: len(cancel_seen) == 2)
    assert sorted(cancel_seen) == sorted([not_asked.step_id, opted_out.step_id])
    for req in (not_asked, opted_out):
        error = await attach_error(stub, attach_request(req, after=2))
        assert error.code() == grpc.StatusCode.NOT_FOUND


async def test_an_attempt_that_cannot_detach_refuses_attach_while_its_stream_is_open(
    stub: pb_grpc.ExecutorServiceStub,
) -> None:
    req = request("sleep", '{"seconds": 30}', detachable=False)
    call = stub.Execute(req)
    await read_until(call, is_running)
    error = await attach_error(stub, attach_request(req, after=2))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "not detachable" in (error.details() or "")
    await stub.Cancel(pb.CancelRequest(step_id=req.step_id, attempt=1, reason="done"))
    rest = [e async for e in call]
    assert rest[-1].cancelled.reason == "done"  # the refused Attach did not disturb it


async def test_progress_stops_at_the_bound_while_detached_but_artifacts_and_outcome_are_kept(
    start_server: StartServer,
) -> None:
    server, stub = await start_server(DetachConfig(max_kept_events=5))
    req = request(
        "probe.ticks", json.dumps({"ticks": 30, "gated": True, "artifact_at": [10, 25]}),
        detachable=True,
    )
    await leave_after(stub.Execute(req), is_running)
    attempt = server.service.attempts.get(req.step_id, req.attempt)
    assert attempt is not None
    await eventually(lambda: not attempt.log.attached)
    gate(req.step_id).set()
    await eventually(lambda: attempt.ended)

    events = await attach(stub, attach_request(req, after=0))
    assert_well_formed(events)  # sequence 1..n: nothing skipped
    assert kinds(events) == [
        "accepted", "running", "progress", "progress", "progress",
        "artifact", "artifact", "succeeded",
    ]
    assert [a.name for a in events[-1].succeeded.artifacts] == ["a10.txt", "a25.txt"]
    assert json.loads(events[-1].succeeded.output_json) == {"ticks": 30}


async def test_an_attached_stream_sees_every_progress_past_the_bound(
    start_server: StartServer,
) -> None:
    _, stub = await start_server(DetachConfig(max_kept_events=5))
    req = request("probe.ticks", json.dumps({"ticks": 30, "interval": 0.001}), detachable=True)
    events = await collect(stub, req)
    assert kinds(events).count("progress") == 30


async def test_an_acknowledging_attach_makes_room_for_progress_again(
    start_server: StartServer,
) -> None:
    server, stub = await start_server(DetachConfig(max_kept_events=5))
    req = request(
        "probe.ticks", json.dumps({"ticks": 400, "interval": 0.005, "gated": True}),
        detachable=True,
    )
    seen = await leave_after(stub.Execute(req), is_running)
    assert [e.sequence for e in seen] == [1, 2]
    attempt = server.service.attempts.get(req.step_id, req.attempt)
    assert attempt is not None
    await eventually(lambda: not attempt.log.attached)
    gate(req.step_id).set()
    await eventually(lambda: len(attempt.log.kept()) == 5)
    at_bound = attempt.log.last_sequence
    await asyncio.sleep(0.1)
    assert attempt.log.last_sequence == at_bound  # no progress produced, none skipped

    call = stub.Attach(attach_request(req, after=at_bound))
    rest = await read_until(call, lambda e: e.sequence == at_bound + 20)
    assert kinds(rest) == ["progress"] * 20
    assert [e.sequence for e in rest] == list(range(at_bound + 1, at_bound + 21))
    call.cancel()


async def test_a_newer_attach_ends_the_older_open_stream_and_takes_over(
    stub: pb_grpc.ExecutorServiceStub,
) -> None:
    req = request("sleep", '{"seconds": 30}', detachable=True)
    execute = stub.Execute(req)
    seen = await read_until(execute, is_running)

    first = stub.Attach(attach_request(req, after=2))
    first_events = await read_until(first, lambda e: e.HasField("progress"))
    # The Execute stream just ends: whatever it had been sent, no outcome.
    assert not TERMINAL & set(kinds([e async for e in execute]))
    assert await execute.code() == grpc.StatusCode.OK

    second = stub.Attach(attach_request(req, after=2))
    second_events = await read_until(second, lambda e: e.HasField("progress"))
    assert not TERMINAL & set(kinds([e async for e in first]))  # superseded: no outcome
    assert await first.code() == grpc.StatusCode.OK
    assert second_events[0] == first_events[0]  # both started right after sequence 2

    await stub.Cancel(pb.CancelRequest(step_id=req.step_id, attempt=1, reason="stop"))
    rest = [e async for e in second]
    assert_well_formed(seen + second_events + rest)
    assert rest[-1].cancelled.reason == "stop"


async def test_a_newer_attempt_supersedes_the_older_one_of_its_step(
    stub: pb_grpc.ExecutorServiceStub,
) -> None:
    old = request("sleep", '{"seconds": 30}', detachable=True, attempt=1, fence=42)
    old_call = stub.Execute(old)
    seen = await read_until(old_call, is_running)

    new = request("sleep", '{"seconds": 0}', step_id=old.step_id, attempt=2, fence=43)
    new_events = await collect(stub, new)
    assert new_events[-1].HasField("succeeded")

    old_events = seen + [e async for e in old_call]
    assert_well_formed(old_events)
    assert old_events[-1].cancelled.reason == "superseded by attempt 2 (fence 43)"
    error = await attach_error(stub, attach_request(old, after=2))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "superseded" in (error.details() or "")
    assert not (await stub.Cancel(pb.CancelRequest(step_id=old.step_id, attempt=1))).found


async def test_an_execute_older_than_an_attempt_known_here_is_refused_as_stale(
    stub: pb_grpc.ExecutorServiceStub,
) -> None:
    newer = request("sleep", '{"seconds": 30}', detachable=True, attempt=2, fence=43)
    await leave_after(stub.Execute(newer), is_running)
    stale = request("sleep", '{"seconds": 0}', step_id=newer.step_id, attempt=1, fence=42)
    events = await collect(stub, stale)
    error = events[-1].failed.error
    assert (error.code, error.retryable) == ("STALE_FENCE", False)
    assert (await stub.Cancel(pb.CancelRequest(step_id=newer.step_id, attempt=2))).found


async def test_shutdown_ends_abandoned_attempts_with_shutting_down_and_names_them(
    start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rara_worker")
    server, stub = await start_server(DetachConfig())
    detached = request("sleep", '{"seconds": 30}', detachable=True)
    attached = request("sleep", '{"seconds": 30}', detachable=True)
    await leave_after(stub.Execute(detached), is_running)
    await leave_after(stub.Execute(attached), is_running)
    call = stub.Attach(attach_request(attached, after=2))
    await read_until(call, lambda e: e.HasField("progress"))
    gone = server.service.attempts.get(detached.step_id, 1)
    assert gone is not None
    await eventually(lambda: not gone.log.attached)

    await server.stop(grace=0.2)
    rest = [e async for e in call]
    error = rest[-1].failed.error
    assert (error.code, error.retryable) == ("SHUTTING_DOWN", True)
    outcome = gone.log.kept()[-1]  # nobody is attached to hear it: its log has it
    assert (outcome.failed.error.code, outcome.failed.error.retryable) == ("SHUTTING_DOWN", True)
    assert f"shutdown abandons step={detached.step_id} attempt=1 fence=42 detached=True" in caplog.text
    assert f"shutdown abandons step={attached.step_id} attempt=1 fence=42 detached=False" in caplog.text
