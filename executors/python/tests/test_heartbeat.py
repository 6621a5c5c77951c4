"""Heartbeats: a quiet stream says it is alive every ``heartbeat_interval_ms``."""

from __future__ import annotations

import json

from support import assert_well_formed, kinds, request

from rara.v1 import executor_pb2 as pb
from rara.v1 import executor_pb2_grpc as pb_grpc


async def events_of(stub: pb_grpc.ExecutorServiceStub, req: pb.ExecuteRequest) -> list[pb.ExecuteResponse]:
    return [e async for e in stub.Execute(req)]


async def test_a_quiet_stream_sends_heartbeats_outside_the_event_order(
    stub: pb_grpc.ExecutorServiceStub,
) -> None:
    # `sleep` reports progress once a second: 100 ms heartbeats fill the gaps.
    req = request("sleep", json.dumps({"seconds": 1.2}), version="1.0.0")
    req.heartbeat_interval_ms = 100
    events = await events_of(stub, req)
    beats = [e for e in events if e.HasField("heartbeat")]
    assert len(beats) >= 5, kinds(events)
    assert all(b.sequence == 0 and b.HasField("timestamp") for b in beats)
    # Without the heartbeats the stream is the contract's order, numbered 1..n.
    attempt = [e for e in events if not e.HasField("heartbeat")]
    assert_well_formed(attempt)
    assert kinds(attempt)[-1] == "succeeded"
    # Never two quiet intervals in a row: between two events at most ~one interval passes.
    stamps = [e.timestamp.ToDatetime() for e in events]
    gaps = [(b - a).total_seconds() for a, b in zip(stamps, stamps[1:])]
    assert max(gaps) < 0.5, gaps


async def test_no_heartbeats_unless_the_request_asks_for_them(stub: pb_grpc.ExecutorServiceStub) -> None:
    events = await events_of(stub, request("sleep", json.dumps({"seconds": 0.3}), version="1.0.0"))
    assert "heartbeat" not in kinds(events)
    assert_well_formed(events)
