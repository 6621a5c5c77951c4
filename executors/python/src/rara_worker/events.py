"""One attempt's events, in the only order the contract allows.

``EventStream`` enforces the order
``accepted, running, (progress | artifact)*, succeeded | failed | cancelled``:
a terminal event emitted early brings the missing ``accepted``/``running`` first,
and anything emitted after the terminal event is dropped. It writes into the attempt's
``EventLog`` (``log.py``), which numbers events from 1, stamps them and serves them to
the attached stream. ``progress`` is also dropped when the log is at its bound (a
detached attempt nobody acknowledges). All methods run on the event loop's thread.
"""

from __future__ import annotations

import enum

from rara.v1 import executor_pb2 as pb
from rara_worker.log import EventLog, Reader


class Phase(enum.Enum):
    """Where the stream is in the contract's order."""

    NEW = "new"
    ACCEPTED = "accepted"
    RUNNING = "running"
    ENDED = "ended"


class EventStream:
    """Builds and orders the events of one attempt and writes them into its log."""

    def __init__(self, log: EventLog | None = None) -> None:
        self.log = log if log is not None else EventLog()
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

    def running(self, capability_version: str = "") -> None:
        """Emit ``running`` (once, after ``accepted``), saying the version that runs."""
        self.accepted()
        if self._phase is Phase.ACCEPTED:
            self._push(pb.ExecuteResponse(running=pb.Running(capability_version=capability_version)))
            self._phase = Phase.RUNNING

    def progress(self, fraction: float, message: str) -> bool:
        """Emit ``progress`` while running and the log has room; False (dropped) otherwise."""
        if self._phase is not Phase.RUNNING or not self.log.room_for_progress():
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

    def events(self) -> Reader:
        """Every event from the first, live, until the terminal one (attaches a reader)."""
        return self.log.attach(0)

    def _end(self, event: pb.ExecuteResponse) -> bool:
        if self._phase is Phase.ENDED:
            return False
        self.running()
        self._phase = Phase.ENDED
        self.log.append(event, terminal=True)
        return True

    def _push(self, event: pb.ExecuteResponse) -> None:
        self.log.append(event)
