"""One attempt's event log: numbered events kept for the streams that read them.

An ``EventLog`` numbers and stamps the events an attempt produces (1, 2, 3, … with no
gaps) and hands them to at most one *attached* reader at a time. ``attach(after)`` starts
a reader at the events after ``after`` and ends the previous reader (a newer ``Attach``
supersedes an older one: the old stream just ends). A reader follows the log live and
ends after the terminal event.

Two ways to keep events:

- ``keep=False`` (an attempt that cannot detach): its one stream is its only reader, so
  an event is dropped as soon as the reader has passed it on;
- ``keep=True`` (a detachable attempt): events are kept until an ``Attach`` acknowledges
  them (``acknowledge(after_sequence)``), because a stream that broke may have lost what
  it was sent. The bound: while no reader is attached and ``max_kept`` events are kept,
  ``room_for_progress()`` is False, so the attempt produces no further ``progress``
  events and the sequence never skips; ``artifact`` and terminal events are always
  kept. An attached reader lifts the bound up to ``ATTACHED_HEADROOM`` × ``max_kept``
  events, so a stream attached for a long time still sees live progress without the
  log growing without end until the next ``Attach`` acknowledges.

All methods run on the event loop's thread.
"""

from __future__ import annotations

import asyncio

from google.protobuf.timestamp_pb2 import Timestamp

from rara.v1 import executor_pb2 as pb

DEFAULT_MAX_KEPT_EVENTS = 1000
"""How many events a detached attempt keeps before its progress events stop."""

ATTACHED_HEADROOM = 10
"""While a stream is attached, progress is kept up to this many times ``max_kept``."""


class EventLog:
    """The numbered events of one attempt, and the reader attached to them."""

    def __init__(self, *, keep: bool = False, max_kept: int = DEFAULT_MAX_KEPT_EVENTS) -> None:
        if max_kept < 1:
            raise ValueError("max_kept must be at least 1")
        self._keep = keep
        self._max_kept = max_kept
        self._kept: list[pb.ExecuteResponse] = []  # contiguous, oldest first
        self._last = 0
        self._ended = False
        self._generation = 0  # of the latest reader
        self._attached = 0  # generation of the attached reader; 0: none
        self._changed = asyncio.Event()

    @property
    def keeps(self) -> bool:
        """True when events are kept until acknowledged (a detachable attempt)."""
        return self._keep

    @property
    def last_sequence(self) -> int:
        """Sequence of the last event produced; 0 before the first."""
        return self._last

    @property
    def acknowledged(self) -> int:
        """Every event up to this sequence has been dropped."""
        return self._kept[0].sequence - 1 if self._kept else self._last

    @property
    def ended(self) -> bool:
        """True once the terminal event is in the log."""
        return self._ended

    @property
    def attached(self) -> bool:
        """True while a reader is attached."""
        return self._attached != 0

    def kept(self) -> list[pb.ExecuteResponse]:
        """The events kept now, oldest first."""
        return list(self._kept)

    def room_for_progress(self) -> bool:
        """False when a ``progress`` event must not be produced (the bound; see above)."""
        if not self._keep:
            return True
        limit = self._max_kept * (ATTACHED_HEADROOM if self.attached else 1)
        return len(self._kept) < limit

    def append(self, event: pb.ExecuteResponse, *, terminal: bool = False) -> None:
        """Number, stamp and keep ``event``; ``terminal`` closes the log."""
        if self._ended:
            raise RuntimeError("the log already holds its terminal event")
        self._last += 1
        event.sequence = self._last
        stamp = Timestamp()
        stamp.GetCurrentTime()
        event.timestamp.CopyFrom(stamp)
        self._kept.append(event)
        self._ended = terminal
        self._wake()

    def acknowledge(self, sequence: int) -> None:
        """Drop the events up to ``sequence``: a reader recorded them."""
        if self._kept:
            del self._kept[: max(0, sequence - self._kept[0].sequence + 1)]

    def attach(self, after: int) -> Reader:
        """A new reader of the events after ``after``; the previous reader ends.

        The caller checks ``after`` first (``acknowledged <= after <= last_sequence``). The
        reader counts as attached from now until it ends, is superseded or is closed
        (``aclose``, e.g. through ``contextlib.aclosing``: a stream that went away).
        """
        self._generation += 1
        self._attached = self._generation
        self._wake()  # the superseded reader, if any, sees it and ends
        return Reader(self, self._generation, after)

    def _next_after(self, cursor: int) -> pb.ExecuteResponse | None:
        if not self._kept:
            return None
        index = max(0, cursor + 1 - self._kept[0].sequence)
        return self._kept[index] if index < len(self._kept) else None

    def _detach(self, generation: int) -> None:
        if self._attached == generation:
            self._attached = 0

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()


class Reader:
    """One attached reader of an ``EventLog``: an async iterator of its events, in order.

    It ends after the terminal event, or as soon as a newer reader is attached.
    """

    def __init__(self, log: EventLog, generation: int, after: int) -> None:
        self._log = log
        self._generation = generation
        self._cursor = after

    def __aiter__(self) -> Reader:
        return self

    async def __anext__(self) -> pb.ExecuteResponse:
        log = self._log
        while log._attached == self._generation:
            changed = log._changed
            event = log._next_after(self._cursor)
            if event is not None:
                self._cursor = event.sequence
                if not log._keep:
                    log.acknowledge(self._cursor)
                return event
            if log._ended and self._cursor >= log._last:
                break
            await changed.wait()
        await self.aclose()
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Detach (when still the attached reader); the iterator then ends."""
        self._log._detach(self._generation)
