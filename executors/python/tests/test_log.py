"""EventLog on its own: numbering, the bound, acknowledgement, one attached reader."""

from __future__ import annotations

import asyncio

from support import kinds

from rara.v1 import executor_pb2 as pb
from rara_worker.events import EventStream
from rara_worker.log import ATTACHED_HEADROOM, EventLog


def detached_stream(max_kept: int) -> EventStream:
    stream = EventStream(EventLog(keep=True, max_kept=max_kept))
    stream.running()
    return stream


async def test_a_detached_log_at_its_bound_produces_no_progress_but_keeps_the_rest() -> None:
    stream = detached_stream(max_kept=4)
    assert [stream.progress(i / 10, "") for i in range(4)] == [True, True, False, False]
    assert stream.artifact(pb.Artifact(name="a"))
    assert stream.succeeded("{}")
    events = stream.log.kept()
    assert kinds(events) == ["accepted", "running", "progress", "progress", "artifact", "succeeded"]
    assert [e.sequence for e in events] == [1, 2, 3, 4, 5, 6]


async def test_acknowledging_drops_events_and_makes_room_again() -> None:
    stream = detached_stream(max_kept=3)
    assert stream.progress(0.1, "") and not stream.progress(0.2, "")
    stream.log.acknowledge(2)
    assert stream.log.acknowledged == 2 and [e.sequence for e in stream.log.kept()] == [3]
    assert stream.progress(0.3, "")
    assert [e.sequence for e in stream.log.kept()] == [3, 4]


async def test_an_attached_reader_lifts_the_bound_up_to_the_headroom() -> None:
    stream = detached_stream(max_kept=2)
    reader = stream.log.attach(0)
    produced = 0
    while stream.progress(0.5, "") and produced < 1000:
        produced += 1
    assert len(stream.log.kept()) == 2 * ATTACHED_HEADROOM
    await reader.aclose()
    assert not stream.log.attached


async def test_a_newer_reader_ends_the_older_one() -> None:
    stream = detached_stream(max_kept=10)
    old = stream.log.attach(0)
    assert (await anext(old)).sequence == 1
    new = stream.log.attach(1)
    assert [e.sequence async for e in old] == []  # superseded: ends at its next step
    stream.succeeded("{}")
    assert [e.sequence async for e in new] == [2, 3]
    assert not stream.log.attached


async def test_a_reader_waits_for_live_events_until_the_terminal_one() -> None:
    stream = EventStream()
    reader = asyncio.create_task(_all(stream))
    stream.running()
    await asyncio.sleep(0.01)
    stream.progress(0.5, "half")
    await asyncio.sleep(0.01)
    stream.cancelled("stop")
    events = await asyncio.wait_for(reader, 1)
    assert kinds(events) == ["accepted", "running", "progress", "cancelled"]
    assert stream.log.kept() == []  # a log that does not keep drops what its reader passed on


async def _all(stream: EventStream) -> list[pb.ExecuteResponse]:
    return [e async for e in stream.events()]
