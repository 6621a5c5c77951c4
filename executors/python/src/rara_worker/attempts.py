"""The attempts this executor knows: running ones, and finished detachable ones it retains.

``AttemptTable`` finds an attempt by (step_id, attempt) for ``Cancel`` and ``Attach``, and
applies the rules between attempts of one step:

- ``admit`` refuses a second ``Execute`` of an attempt that still runs here
  (``ALREADY_RUNNING``), one of a retained attempt with another secret
  (``ATTEMPT_SECRET_MISMATCH``), and an ``Execute`` whose (fence, attempt) is older than an
  attempt of the same step known here that vouched for it (``STALE_FENCE``: a holder rara
  has replaced). It stops every older attempt of the step it vouches for that still runs
  ("superseded by attempt N (fence F)") and marks each stale, running or retained: rara
  never runs two attempts of one step. Vouching (``Attempt.vouches_for``) is the proto's
  ``prior_attempt_secrets`` rule: a caller without the secrets (a peer holding only the
  token) neither stops nor blocks rara's attempts.
- ``finished`` forgets a non-detachable attempt at once (as before detaching existed: no
  stream can come back for it) and keeps a detachable one for ``retention`` seconds, so a
  late ``Attach`` still gets its terminal event and whatever it did not acknowledge.

``DetachConfig`` holds the two numbers an operator sets (``--retention``,
``--max-kept-events``). All methods run on the event loop's thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass

from rara.v1 import executor_pb2 as pb
from rara_worker import errors
from rara_worker.attempt import Attempt
from rara_worker.log import DEFAULT_MAX_KEPT_EVENTS

log = logging.getLogger(__name__)

DEFAULT_RETENTION_SECONDS = 15 * 60.0
"""How long a finished detachable attempt stays attachable."""


@dataclass(frozen=True)
class DetachConfig:
    """How long finished detachable attempts are retained and how many events they keep."""

    retention_seconds: float = DEFAULT_RETENTION_SECONDS
    max_kept_events: int = DEFAULT_MAX_KEPT_EVENTS

    def __post_init__(self) -> None:
        if not self.retention_seconds >= 0:  # also refuses NaN
            raise ValueError(
                f"retention must be a number of seconds >= 0, got {self.retention_seconds}"
            )
        if self.max_kept_events < 1:
            raise ValueError(f"max kept events must be at least 1, got {self.max_kept_events}")


class AttemptTable:
    """Attempts by (step_id, attempt), with the rules between attempts of one step."""

    def __init__(self, retention_seconds: float) -> None:
        self._retention = retention_seconds
        self._by_step: dict[str, dict[int, Attempt]] = {}
        self._expiries: dict[tuple[str, int], asyncio.TimerHandle] = {}

    def get(self, step_id: str, attempt: int) -> Attempt | None:
        """The attempt, running or retained; None when it is unknown or forgotten."""
        return self._by_step.get(step_id, {}).get(attempt)

    def running(self) -> list[Attempt]:
        """Every attempt that has not produced its terminal event."""
        return [a for a in self._all() if not a.ended]

    def admit(self, attempt: Attempt) -> pb.Error | None:
        """Add ``attempt`` (superseding older ones of its step), or say why it may not run."""
        same = self.get(attempt.step_id, attempt.number)
        if same is not None and not same.ended:
            return errors.make_error(
                errors.ALREADY_RUNNING, "this step attempt is already running here", True
            )
        if same is not None and not same.admits_secret(attempt.secret):
            return errors.make_error(
                errors.ATTEMPT_SECRET_MISMATCH,
                "this step attempt ran here under another attempt secret", False,
            )
        newer = [k for k in self._of_step(attempt.step_id) if _age(k) > _age(attempt)]
        newest = max((k for k in newer if k.vouches_for(attempt)), key=_age, default=None)
        if newest is not None:
            return errors.make_error(
                errors.STALE_FENCE,
                f"fence {attempt.fence} is stale: attempt {newest.number} of this step "
                f"runs or ran here under fence {newest.fence}",
                False,
                {"fence": str(attempt.fence), "newer_attempt": str(newest.number),
                 "newer_fence": str(newest.fence)},
            )
        for older in self._of_step(attempt.step_id):
            if older is same or older.superseded_by is not None or _age(older) >= _age(attempt):
                continue
            if attempt.vouches_for(older):
                older.supersede(attempt.number, attempt.fence)
            else:
                log.warning(
                    "not superseded (no proof of its secret) step=%s attempt=%d fence=%d "
                    "by_attempt=%d by_fence=%d",
                    older.step_id, older.number, older.fence, attempt.number, attempt.fence,
                )
        if same is not None:
            self._forget(same)  # retained and finished: the new execution replaces it
        self._by_step.setdefault(attempt.step_id, {})[attempt.number] = attempt
        return None

    def finished(self, attempt: Attempt) -> None:
        """The attempt's task is done: forget it now, or after the retention if detachable."""
        if self.get(attempt.step_id, attempt.number) is not attempt:
            return
        if not attempt.detachable:
            self._forget(attempt)
            return
        self._expiries[attempt.key] = asyncio.get_running_loop().call_later(
            self._retention, self._forget, attempt
        )

    def close(self) -> None:
        """Stop the retention timers (the server is gone; nothing can attach)."""
        for handle in self._expiries.values():
            handle.cancel()
        self._expiries.clear()

    def _forget(self, attempt: Attempt) -> None:
        attempts = self._by_step.get(attempt.step_id, {})
        if attempts.get(attempt.number) is attempt:
            del attempts[attempt.number]
            if not attempts:
                del self._by_step[attempt.step_id]
        handle = self._expiries.pop(attempt.key, None)
        if handle is not None:
            handle.cancel()

    def _of_step(self, step_id: str) -> list[Attempt]:
        return list(self._by_step.get(step_id, {}).values())

    def _all(self) -> Iterator[Attempt]:
        for attempts in self._by_step.values():
            yield from attempts.values()


def _age(attempt: Attempt) -> tuple[int, int]:
    """Order of attempts of one step: by fence (it only grows), then attempt number."""
    return (attempt.fence, attempt.number)
