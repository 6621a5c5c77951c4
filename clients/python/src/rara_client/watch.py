"""Watching a run: what changed between two reads of it, and the server-sent events that say
when to read again.

The API's live stream is the console's (``GET /runs/{id}/events``, the same one a run page
listens to): each event says the run changed, and the watcher then reads the run
(``GET /api/runs/{id}``) and yields each step whose state moved. Where the server has no live
stream (under Lambda it answers ``204``; to an anonymous reader ``401``) the watcher polls.
A stream that breaks is reconnected, and the run read again, so nothing is missed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .types import RUN_FINISHED, Run, Step


@dataclass(frozen=True)
class StepChange:
    """A step whose status, attempt or progress moved (or that was seen for the first time:
    ``previous`` is ``None``)."""

    step: Step
    previous: Step | None
    run: Run

    @property
    def name(self) -> str:
        return self.step["name"]

    @property
    def status(self) -> str:
        return self.step["status"]

    @property
    def fraction(self) -> float:
        """How far the step got, 0 to 1 (1 once it succeeded)."""
        if self.step["status"] == "succeeded":
            return 1.0
        progress = self.step.get("progress")
        return float(progress["fraction"]) if progress else 0.0


@dataclass(frozen=True)
class RunFinished:
    """The run ended (``succeeded``, ``failed`` or ``cancelled``): the last thing a watch yields."""

    run: Run

    @property
    def status(self) -> str:
        return self.run["status"]

    @property
    def output(self) -> Any:
        return self.run.get("output")


WatchEvent = StepChange | RunFinished


def _state(step: Step) -> tuple[Any, ...]:
    progress = step.get("progress")
    return (step["status"], step["attempt"], progress and (progress["fraction"], progress["message"]),
            step.get("waiting_for"), step.get("map_size"))


def changes(before: Run | None, after: Run) -> list[WatchEvent]:
    """What moved from ``before`` to ``after``, and the run's end once it ended."""
    seen = {s["id"]: s for s in before["steps"]} if before else {}
    moved: list[WatchEvent] = []
    for step in after["steps"]:
        previous = seen.get(step["id"])
        if previous is None or _state(previous) != _state(step):
            moved.append(StepChange(step, previous, after))
    if after["status"] in RUN_FINISHED:
        moved.append(RunFinished(after))
    return moved


class EventLines:
    """Server-sent event lines in, one ``True`` per complete event out (comments, the
    keep-alives, are not events)."""

    def __init__(self) -> None:
        self._pending = False

    def feed(self, line: str) -> bool:
        if line == "":
            done, self._pending = self._pending, False
            return done
        if not line.startswith(":"):
            self._pending = True
        return False
