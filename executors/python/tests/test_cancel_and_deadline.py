"""Cancellation, deadlines, and attempts that end early."""

from __future__ import annotations

import asyncio
import time

import grpc
from support import assert_well_formed, collect, kinds, request

from rara.v1 import executor_pb2 as pb
from rara.v1 import executor_pb2_grpc as pb_grpc
from rara_worker.events import EventStream


async def test_cancel_mid_sleep_ends_the_stream_with_cancelled(
    stub: pb_grpc.ExecutorServiceStub,
) -> None:
    req = request("sleep", '{"seconds": 30}')
    call = stub.Execute(req)
    events = []
    async for event in call:
        events.append(event)
        if event.HasField("progress"):
            break
    started = time.monotonic()
    response = await stub.Cancel(
        pb.CancelRequest(step_id=req.step_id, attempt=req.attempt, reason="user asked")
    )
    assert response.found
    events += [e async for e in call]
    assert time.monotonic() - started < 2.0
    assert_well_formed(events)
    assert events[-1].cancelled.reason == "user asked"


async def test_cancel_of_an_unknown_attempt_is_not_found(stub: pb_grpc.ExecutorServiceStub) -> None:
    req = request("sleep", '{"seconds": 0}')
    await collect(stub, req)  # finished: no longer cancellable
    response = await stub.Cancel(pb.CancelRequest(step_id=req.step_id, attempt=1, reason="late"))
    assert not response.found


async def test_a_deadline_in_the_past_fails_retryable_without_running(
    stub: pb_grpc.ExecutorServiceStub,
) -> None:
    events = await collect(stub, request("sleep", '{"seconds": 5}', deadline_in=-1.0))
    assert kinds(events) == ["accepted", "running", "failed"]
    error = events[-1].failed.error
    assert (error.code, error.retryable) == ("DEADLINE_EXCEEDED", True)


async def test_a_short_deadline_stops_the_handler(
    stub: pb_grpc.ExecutorServiceStub, cancel_seen: list[str]
) -> None:
    req = request("probe.cancellable", deadline_in=0.3)
    started = time.monotonic()
    events = await collect(stub, req)
    assert time.monotonic() - started < 2.0
    error = events[-1].failed.error
    assert (error.code, error.retryable) == ("DEADLINE_EXCEEDED", True)
    await asyncio.sleep(0.05)
    assert cancel_seen == [req.step_id]


async def test_a_second_stream_for_a_running_attempt_is_refused(
    stub: pb_grpc.ExecutorServiceStub,
) -> None:
    req = request("sleep", '{"seconds": 30}')
    first = stub.Execute(req)
    async for event in first:
        if event.HasField("running"):
            break
    events = await collect(stub, req)
    assert events[-1].failed.error.code == "ALREADY_RUNNING"
    first.cancel()


async def test_a_client_that_goes_away_cancels_the_handler(
    stub: pb_grpc.ExecutorServiceStub, cancel_seen: list[str]
) -> None:
    req = request("probe.cancellable")
    call = stub.Execute(req)
    async for event in call:
        if event.HasField("running"):
            break
    call.cancel()
    for _ in range(50):
        if cancel_seen:
            break
        await asyncio.sleep(0.02)
    assert cancel_seen == [req.step_id]
    assert call.cancelled() or (await call.code()) == grpc.StatusCode.CANCELLED


async def test_reports_after_the_terminal_event_are_dropped() -> None:
    stream = EventStream()
    stream.running()
    assert stream.progress(0.5, "half")
    assert stream.failed(pb.Error(code="X"))
    assert not stream.progress(0.9, "late")
    assert not stream.artifact(pb.Artifact(name="late"))
    assert not stream.succeeded("{}")
    events = [e async for e in stream.events()]
    assert kinds(events) == ["accepted", "running", "progress", "failed"]
    assert_well_formed(events)
