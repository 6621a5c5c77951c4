"""Heartbeats on a quiet stream (``ExecuteResponse.heartbeat``).

A request's ``heartbeat_interval_ms`` (0: none) asks for a ``heartbeat`` event whenever
the stream has sent nothing for that long, so that rara can tell a long, quiet attempt
from an executor that hangs: rara gives up on a stream silent for three intervals. A
heartbeat carries sequence 0 and is not an event of the attempt: it is never kept in the
attempt's log, so ``Attach`` does not replay it and sequence numbers never skip.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from google.protobuf.timestamp_pb2 import Timestamp

from rara.v1 import executor_pb2 as pb
from rara_worker.log import Reader


def heartbeat() -> pb.ExecuteResponse:
    """One heartbeat event: sequence 0, stamped now."""
    stamp = Timestamp()
    stamp.GetCurrentTime()
    return pb.ExecuteResponse(sequence=0, timestamp=stamp, heartbeat=pb.Heartbeat())


async def with_heartbeats(events: Reader, interval_ms: int) -> AsyncIterator[pb.ExecuteResponse]:
    """The events of ``events``, with a heartbeat after every ``interval_ms`` without one.

    Waiting for the next event is cancellation-safe (``Reader.__anext__`` moves its cursor
    only when it returns an event), so a wait that times out loses nothing.
    """
    if interval_ms <= 0:
        async for event in events:
            yield event
        return
    interval = interval_ms / 1000
    while True:
        try:
            event = await asyncio.wait_for(events.__anext__(), interval)
        except TimeoutError:
            yield heartbeat()
            continue
        except StopAsyncIteration:
            return
        yield event
