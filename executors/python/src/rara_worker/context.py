"""What a handler receives: who it runs for, its deadline, and how to report back.

Async handlers ``await ctx.progress(...)``, ``await ctx.artifact(...)`` and
``await ctx.write_artifact(...)``. Sync handlers (run in a thread) call the ``*_sync``
variants. Both watch ``ctx.cancelled`` (an ``asyncio.Event``; from a thread, read
``ctx.cancelled.is_set()``) to stop early when the attempt is cancelled or its
deadline passes. Reports after the attempt ended are ignored, and so are progress
reports of a detached attempt whose kept events are at the executor's bound (``log.py``):
report as often as is useful; the bound, not the handler, keeps memory in check.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import threading
from datetime import UTC, datetime
from pathlib import Path

from rara.v1 import executor_pb2 as pb
from rara_worker.events import EventStream

_ARTIFACT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


class Context:
    """The context of one attempt of one step."""

    def __init__(
        self,
        *,
        run_id: str,
        step_id: str,
        map_index: int | None = None,
        attempt: int,
        fence: int,
        deadline: datetime | None,
        trace_context: dict[str, str],
        artifacts_root: Path,
        events: EventStream,
    ) -> None:
        self.run_id = run_id
        self.step_id = step_id
        #: For a child of a map step (``for_each``): its element's index in the list, else None.
        self.map_index = map_index
        self.attempt = attempt
        self.fence = fence
        self.deadline = deadline
        self.trace_context = trace_context
        #: Set when the attempt is cancelled or its deadline passed: stop the work.
        self.cancelled = asyncio.Event()
        #: Local directory for this attempt's artifact files (created on first write).
        self.artifacts_dir = artifacts_root / run_id / step_id / f"attempt-{attempt}"
        self._events = events
        self._loop = asyncio.get_running_loop()
        self._names: set[str] = set()
        self._names_lock = threading.Lock()

    def time_left(self) -> float | None:
        """Seconds until the deadline (negative when past), or None without one."""
        if self.deadline is None:
            return None
        return (self.deadline - datetime.now(UTC)).total_seconds()

    async def progress(self, fraction: float, message: str = "") -> None:
        """Report how far the work got (``fraction`` from 0.0 to 1.0)."""
        _check_fraction(fraction)
        self._events.progress(fraction, message)
        await asyncio.sleep(0)

    def progress_sync(self, fraction: float, message: str = "") -> None:
        """``progress`` for sync handlers running in a thread."""
        _check_fraction(fraction)
        self._loop.call_soon_threadsafe(self._events.progress, fraction, message)

    async def artifact(
        self, name: str, uri: str, media_type: str, size_bytes: int, digest: str
    ) -> pb.Artifact:
        """Report an artifact stored elsewhere (e.g. ``s3://...``)."""
        self._reserve(name)
        artifact = self._describe(name, uri, media_type, size_bytes, digest)
        self._events.artifact(artifact)
        await asyncio.sleep(0)
        return artifact

    def artifact_sync(
        self, name: str, uri: str, media_type: str, size_bytes: int, digest: str
    ) -> pb.Artifact:
        """``artifact`` for sync handlers running in a thread."""
        self._reserve(name)
        artifact = self._describe(name, uri, media_type, size_bytes, digest)
        self._loop.call_soon_threadsafe(self._events.artifact, artifact)
        return artifact

    async def write_artifact(
        self, name: str, data: bytes | str, media_type: str = "application/octet-stream"
    ) -> pb.Artifact:
        """Write ``data`` to ``artifacts_dir/name`` and report it with size and sha256."""
        artifact = await asyncio.to_thread(self._write, name, data, media_type)
        self._events.artifact(artifact)
        return artifact

    def write_artifact_sync(
        self, name: str, data: bytes | str, media_type: str = "application/octet-stream"
    ) -> pb.Artifact:
        """``write_artifact`` for sync handlers running in a thread."""
        artifact = self._write(name, data, media_type)
        self._loop.call_soon_threadsafe(self._events.artifact, artifact)
        return artifact

    def _write(self, name: str, data: bytes | str, media_type: str) -> pb.Artifact:
        if not _ARTIFACT_NAME.fullmatch(name):
            raise ValueError(f"artifact name {name!r} must be a plain file name")
        self._reserve(name)
        raw = data.encode() if isinstance(data, str) else data
        self.artifacts_dir.mkdir(parents=True, exist_ok=True)
        path = self.artifacts_dir / name
        path.write_bytes(raw)
        digest = "sha256:" + hashlib.sha256(raw).hexdigest()
        return self._describe(name, path.resolve().as_uri(), media_type, len(raw), digest)

    def _reserve(self, name: str) -> None:
        if not name:
            raise ValueError("an artifact needs a name")
        with self._names_lock:
            if name in self._names:
                raise ValueError(f"artifact {name!r} was already reported in this attempt")
            self._names.add(name)

    @staticmethod
    def _describe(
        name: str, uri: str, media_type: str, size_bytes: int, digest: str
    ) -> pb.Artifact:
        if not uri:
            raise ValueError("an artifact needs a uri")
        if size_bytes < 0:
            raise ValueError("artifact size_bytes must not be negative")
        return pb.Artifact(
            name=name, uri=uri, media_type=media_type, size_bytes=size_bytes, digest=digest
        )


def _check_fraction(fraction: float) -> None:
    if not (math.isfinite(fraction) and 0.0 <= fraction <= 1.0):
        raise ValueError(f"progress fraction must be within 0.0..1.0, got {fraction}")
