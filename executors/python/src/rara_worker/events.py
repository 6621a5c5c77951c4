"""One ``Execute`` stream's events, in the only order the contract allows.

``EventStream`` numbers events from 1, stamps them, and enforces the order
``accepted, running, (progress | artifact)*, succeeded | failed | cancelled``:
a terminal event emitted early brings the missing ``accepted``/``running`` first,
and anything emitted after the terminal event is dropped. All methods run on the
event loop's thread.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import AsyncIterator

from google.protobuf.timestamp_pb2 import Timestamp

from rara.v1 import executor_pb2 as pb


class Phase(enum.Enum):
    """Where the stream is in the contract's order."""

    NEW = "new"
    ACCEPTED = "accepted"
    RUNNING = "running"
    ENDED = "ended"


class EventStream:
    """Builds, orders and queues the events of one attempt."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[pb.ExecuteResponse | None] = asyncio.Queue()
        self._sequence = 0
        self._phase = Phase.NEW
        self._artifacts: list[pb.Artifact] = []

    @property
    def ended(self) -> bool:
        """True once the terminal event was emitted."""
        return self._phase is Phase.ENDED

    def accepted(self) -> None:
        """Emit ``accepted`` (once, first)."""
        if self._phase is Phase.NEW:
            self._push(pb.ExecuteResponse(accepted=pb.Accepted()))
            self._phase = Phase.ACCEPTED

    def running(self) -> None:
        """Emit ``running`` (once, after ``accepted``)."""
        self.accepted()
        if self._phase is Phase.ACCEPTED:
            self._push(pb.ExecuteResponse(running=pb.Running()))
            self._phase = Phase.RUNNING

    def progress(self, fraction: float, message: str) -> bool:
        """Emit ``progress`` while running; False (dropped) otherwise."""
        if self._phase is not Phase.RUNNING:
            return False
        self._push(pb.ExecuteResponse(progress=pb.Progress(fraction=fraction, message=message)))
        return True

    def artifact(self, artifact: pb.Artifact) -> bool:
        """Emit ``artifact`` while running and remember it for ``succeeded``."""
        if self._phase is not Phase.RUNNING:
            return False
        self._artifacts.append(artifact)
        self._push(pb.ExecuteResponse(artifact=artifact))
        return True

    def succeeded(self, output_json: str) -> bool:
        """Terminal: the output and every artifact reported so far."""
        return self._end(
            pb.ExecuteResponse(
                succeeded=pb.Succeeded(output_json=output_json, artifacts=self._artifacts)
            )
        )

    def failed(self, error: pb.Error) -> bool:
        """Terminal: a structured error."""
        return self._end(pb.ExecuteResponse(failed=pb.Failed(error=error)))

    def cancelled(self, reason: str) -> bool:
        """Terminal: the attempt was cancelled."""
        return self._end(pb.ExecuteResponse(cancelled=pb.Cancelled(reason=reason)))

    async def events(self) -> AsyncIterator[pb.ExecuteResponse]:
        """Yield queued events until the terminal one has been yielded."""
        while (event := await self._queue.get()) is not None:
            yield event

    def _end(self, event: pb.ExecuteResponse) -> bool:
        if self._phase is Phase.ENDED:
            return False
        self.running()
        self._push(event)
        self._phase = Phase.ENDED
        self._queue.put_nowait(None)
        return True

    def _push(self, event: pb.ExecuteResponse) -> None:
        self._sequence += 1
        event.sequence = self._sequence
        stamp = Timestamp()
        stamp.GetCurrentTime()
        event.timestamp.CopyFrom(stamp)
        self._queue.put_nowait(event)
