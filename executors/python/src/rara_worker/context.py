"""What a handler receives: who it runs for, its deadline, and how to report back.

Async handlers ``await ctx.progress(...)``, ``await ctx.artifact(...)`` and
``await ctx.write_artifact(...)`` (to the artifact store, streamed: bytes, text, a path or a
binary stream), ``await ctx.read_artifact(descriptor)`` / ``download_artifact`` (verified
against the digest) and ``await ctx.load_output(value)`` (an offloaded ``{"$stored": …}``
output read back whole). Sync handlers (run in a thread) call the ``*_sync``
variants. Both watch ``ctx.cancelled`` (an ``asyncio.Event``; from a thread, read
``ctx.cancelled.is_set()``) to stop early when the attempt is cancelled or its
deadline passes. Reports after the attempt ended are ignored, and so are progress
reports of a detached attempt whose kept events are at the executor's bound (``log.py``):
report as often as is useful; the bound, not the handler, keeps memory in check.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import math
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from rara.v1 import executor_pb2 as pb
from rara_worker.events import EventStream
from rara_worker.store import FileStore, Store, artifact_key, copy_verified, source_of

#: What ``write_artifact`` takes.
Data = bytes | str | os.PathLike[str] | IO[bytes]
#: An artifact's descriptor: a ``$artifact`` reference's value, a ``$stored`` one's, or a report.
Descriptor = dict[str, Any] | pb.Artifact


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
        artifacts_root: Path | Store,
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
        #: Where ``write_artifact`` writes: the store of RARA_ARTIFACTS_URI, or a directory.
        self.store: Store = FileStore(artifacts_root) if isinstance(artifacts_root, Path) else artifacts_root
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
        self, name: str, data: Data, media_type: str = "application/octet-stream"
    ) -> pb.Artifact:
        """Stream ``data`` (bytes, text, a path or a binary stream) to the artifact store under
        ``runs/{run}/{step}/{attempt}/{name}`` and report it with its size and sha256."""
        artifact = await asyncio.to_thread(self._write, name, data, media_type)
        self._events.artifact(artifact)
        return artifact

    def write_artifact_sync(
        self, name: str, data: Data, media_type: str = "application/octet-stream"
    ) -> pb.Artifact:
        """``write_artifact`` for sync handlers running in a thread."""
        artifact = self._write(name, data, media_type)
        self._loop.call_soon_threadsafe(self._events.artifact, artifact)
        return artifact

    async def read_artifact(self, descriptor: Descriptor) -> bytes:
        """The whole artifact ``descriptor`` names, checked against its digest."""
        return await asyncio.to_thread(self._read, descriptor)

    async def download_artifact(self, descriptor: Descriptor, path: Path) -> Path:
        """Stream the artifact to ``path`` (renamed into place only once its digest matched)."""
        return await asyncio.to_thread(self._download, descriptor, path)

    async def load_output(self, value: Any) -> Any:
        """``value``, or when it is an offloaded output (``{"$stored": descriptor}``, what a
        ``$output`` reference to a large output passes on) the output read back whole; the
        same for a run's offloaded inputs (what ``{"$input": ""}`` passes on)."""
        if isinstance(value, dict) and set(value) == {"$stored"}:
            return json.loads(await self.read_artifact(value["$stored"]))
        return value

    def _write(self, name: str, data: Data, media_type: str) -> pb.Artifact:
        key = artifact_key(self.run_id, self.step_id, self.attempt, name)
        self._reserve(name)
        with source_of(data) as source:
            uri, size, digest = self.store.put(key, source, media_type)
        return self._describe(name, uri, media_type, size, digest)

    def _read(self, descriptor: Descriptor) -> bytes:
        uri, digest = _fields(descriptor)
        out = io.BytesIO()
        with contextlib.closing(self.store.open(uri)) as source:
            copy_verified(source, out, digest)
        return out.getvalue()

    def _download(self, descriptor: Descriptor, path: Path) -> Path:
        uri, digest = _fields(descriptor)
        partial = path.with_name(path.name + ".partial")
        try:
            with contextlib.closing(self.store.open(uri)) as source, partial.open("wb") as out:
                copy_verified(source, out, digest)
            partial.replace(path)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        return path

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


def _fields(descriptor: Descriptor) -> tuple[str, str | None]:
    if isinstance(descriptor, pb.Artifact):
        return descriptor.uri, descriptor.digest or None
    return str(descriptor["uri"]), descriptor.get("digest")


def _check_fraction(fraction: float) -> None:
    if not (math.isfinite(fraction) and 0.0 <= fraction <= 1.0):
        raise ValueError(f"progress fraction must be within 0.0..1.0, got {fraction}")
