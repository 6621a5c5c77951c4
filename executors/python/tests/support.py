"""Test helpers: a registry with known failures, requests, and the event-order check."""

from __future__ import annotations

import asyncio
import hashlib
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta
from collections.abc import Callable
from pathlib import Path
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from rara.v1 import executor_pb2 as pb
from rara.v1 import executor_pb2_grpc as pb_grpc
from rara_worker import CapabilityRegistry, Context, PermanentError, RetryableError
from rara_worker.examples import build_registry

TERMINAL = {"succeeded", "failed", "cancelled"}


_GATES: dict[str, asyncio.Event] = {}


def gate(step_id: str) -> asyncio.Event:
    """The event a gated ``probe.ticks`` of ``step_id`` waits for before it starts ticking."""
    return _GATES.setdefault(step_id, asyncio.Event())


def make_registry(cancel_seen: list[str], data_dir: Path) -> CapabilityRegistry:
    """The examples (reading below ``data_dir``) plus handlers that fail in known ways."""
    reg = CapabilityRegistry()
    for cap in build_registry(data_dir):
        reg.register(cap)

    @reg.capability("fail.retryable", version="1.0.0")
    async def fail_retryable(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        raise RetryableError("UPSTREAM_DOWN", "the upstream is down", {"upstream": "db"})

    @reg.capability("fail.permanent", version="1.0.0")
    async def fail_permanent(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        raise PermanentError("NOT_FOUND", "no such thing")

    @reg.capability("fail.value", version="1.0.0")
    async def fail_value(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        raise ValueError("bad value")

    @reg.capability("fail.timeout", version="1.0.0")
    def fail_timeout(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        raise TimeoutError("upstream timed out")

    @reg.capability("bad.output", version="1.0.0")
    async def bad_output(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        return {"value": float("nan")}

    @reg.capability("sync.echo", version="1.0.0")
    def sync_echo(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        ctx.progress_sync(0.5, "half way")
        ctx.write_artifact_sync("echo.json", b"{}", "application/json")
        return {
            "echo": input, "step_id": ctx.step_id, "fence": ctx.fence,
            "run_id": ctx.run_id, "map_index": ctx.map_index,
        }

    @reg.capability("versioned", version="1.2.0")
    async def versioned_old(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        return {"version": "1.2.0"}

    @reg.capability("versioned", version="1.10.0")
    async def versioned_new(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        return {"version": "1.10.0"}

    @reg.capability("probe.cancellable", version="1.0.0")
    async def cancellable(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancel_seen.append(ctx.step_id)
            raise
        return {}

    @reg.capability("probe.pinned", version="1.0.0", detachable=False)
    async def pinned(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        return await cancellable(ctx, input)

    @reg.capability("probe.ticks", version="1.0.0")
    async def ticks(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        """After ``delay`` s (and, with ``"gated": true``, once ``gate(step_id)`` is set),
        ``ticks`` progress reports ``interval`` s apart; an artifact before each tick listed
        in ``artifact_at``."""
        await asyncio.sleep(float(input.get("delay", 0)))
        if input.get("gated"):
            await gate(ctx.step_id).wait()
        n, interval = int(input["ticks"]), float(input.get("interval", 0))
        for i in range(n):
            if i in input.get("artifact_at", []):
                await ctx.artifact(f"a{i}.txt", f"s3://bucket/a{i}.txt", "text/plain", 1, "sha256:00")
            await ctx.progress((i + 1) / n, f"tick {i + 1}")
            await asyncio.sleep(interval)
        return {"ticks": n}

    return reg


def request(
    operation: str,
    input_json: str = "{}",
    *,
    version: str = "",
    attempt: int = 1,
    deadline_in: float | None = 30.0,
    step_id: str | None = None,
    fence: int = 42,
    detachable: bool = False,
    map_index: int | None = None,
) -> pb.ExecuteRequest:
    """An ExecuteRequest with fresh ids and a deadline ``deadline_in`` seconds away."""
    req = pb.ExecuteRequest(
        run_id=str(uuid.uuid4()),
        step_id=step_id or str(uuid.uuid4()),
        attempt=attempt,
        fence=fence,
        detachable=detachable,
        operation=operation,
        capability_version=version,
        input_json=input_json,
        trace_context={"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
    )
    if map_index is not None:
        req.map_index = map_index
    if deadline_in is not None:
        stamp = Timestamp()
        stamp.FromDatetime(datetime.now(UTC) + timedelta(seconds=deadline_in))
        req.deadline.CopyFrom(stamp)
    return req


async def collect(
    stub: pb_grpc.ExecutorServiceStub, req: pb.ExecuteRequest
) -> list[pb.ExecuteResponse]:
    """All events of one Execute call, checked against the contract's order."""
    events = [e async for e in stub.Execute(req)]
    assert_well_formed(events)
    return events


def attach_request(
    req: pb.ExecuteRequest, after: int, *, fence: int | None = None
) -> pb.AttachRequest:
    """An AttachRequest for the attempt ``req`` started, after sequence ``after``."""
    return pb.AttachRequest(
        step_id=req.step_id, attempt=req.attempt,
        fence=req.fence if fence is None else fence, after_sequence=after,
        trace_context=dict(req.trace_context),
    )


async def read_until(
    call: Any, stop: Callable[[pb.ExecuteResponse], bool]
) -> list[pb.ExecuteResponse]:
    """Events of a streaming ``call`` up to the first ``stop`` accepts (the call stays open)."""
    events: list[pb.ExecuteResponse] = []
    async for event in call:
        events.append(event)
        if stop(event):
            break
    return events


async def leave_after(
    call: Any, stop: Callable[[pb.ExecuteResponse], bool]
) -> list[pb.ExecuteResponse]:
    """``read_until``, then the client goes away (cancels the call), as a parked caller does."""
    events = await read_until(call, stop)
    call.cancel()
    return events


async def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Wait until ``condition()`` holds (polling), or fail."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition never held"
        await asyncio.sleep(0.01)


def kinds(events: list[pb.ExecuteResponse]) -> list[str]:
    return [str(e.WhichOneof("event")) for e in events]


def assert_well_formed(events: list[pb.ExecuteResponse]) -> None:
    """accepted, running, (progress|artifact)*, one terminal; sequence 1..n; timestamps."""
    names = kinds(events)
    assert names[:2] == ["accepted", "running"], names
    assert names[-1] in TERMINAL, names
    assert set(names[2:-1]) <= {"progress", "artifact"}, names
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    stamps = [e.timestamp.ToDatetime() for e in events]
    assert all(e.HasField("timestamp") for e in events)
    assert stamps == sorted(stamps)


def sha256_file(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def localstack_s3(endpoint: str) -> bool:
    """Whether LocalStack answers at ``endpoint`` with S3 among its services."""
    try:
        with urllib.request.urlopen(f"{endpoint}/_localstack/health", timeout=2) as response:
            return b'"s3"' in response.read()
    except OSError:
        return False
