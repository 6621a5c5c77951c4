"""Running one attempt: check the request, call the handler, enforce deadline and cancel.

An attempt owns its events (an ``EventStream`` writing into an ``EventLog``), not the
stream that reads them: the server decides what a stream that goes away means (stop a
non-detachable attempt; leave a detachable one running). It is *detachable* when the
request asks for it and its capability allows it; only then does its log keep events
until acknowledged (``log.py``).

Every path that runs ends the attempt's ``EventStream`` with exactly one terminal event:

- the handler returned an object: ``succeeded`` (``INVALID_OUTPUT`` if it is not JSON);
- the handler raised: ``failed`` with the error ``errors.to_error`` gives;
- the deadline passed: the handler is cancelled, ``failed`` ``DEADLINE_EXCEEDED``;
- ``stop()`` was called (``Cancel`` RPC, a newer attempt, shutdown): the handler is
  cancelled, then ``cancelled`` with the reason, or ``failed`` with the error given.

A request the server refuses before running (``refuse``) ends with ``failed`` at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

from rara.v1 import executor_pb2 as pb
from rara_worker import errors, telemetry
from rara_worker.auth import secrets_match
from rara_worker.capability import AsyncHandler, Capability, CapabilityRegistry, SyncHandler
from rara_worker.context import Context
from rara_worker.events import EventStream
from rara_worker.log import DEFAULT_MAX_KEPT_EVENTS, EventLog
from rara_worker.store import Store

log = logging.getLogger(__name__)

# Handler tasks cancelled but not finished yet; kept so they are not garbage-collected.
_cancelled_handlers: set[asyncio.Task[object]] = set()


class Attempt:
    """One execution of one step, named by (step_id, attempt)."""

    def __init__(
        self,
        request: pb.ExecuteRequest,
        registry: CapabilityRegistry,
        artifacts_root: Path | Store,
        *,
        max_kept_events: int = DEFAULT_MAX_KEPT_EVENTS,
    ) -> None:
        self._request = request
        self._capability = registry.resolve(request.operation, request.capability_version)
        #: May outlive its ``Execute`` stream: asked for, and the capability allows it.
        self.detachable = bool(
            request.detachable and self._capability is not None and self._capability.detachable
        )
        self._stream = EventStream(EventLog(keep=self.detachable, max_kept=max_kept_events))
        self._artifacts_root = artifacts_root
        self._stop_requested = asyncio.Event()
        self._stop_reason = ""
        self._stop_error: pb.Error | None = None
        #: (attempt, fence) of the newer attempt of the same step that replaced this one.
        self.superseded_by: tuple[int, int] | None = None

    @property
    def key(self) -> tuple[str, int]:
        """(step_id, attempt): how ``Cancel`` and ``Attach`` find this attempt."""
        return (self._request.step_id, self._request.attempt)

    @property
    def step_id(self) -> str:
        """The step this attempt runs."""
        return self._request.step_id

    @property
    def number(self) -> int:
        """The attempt number."""
        return self._request.attempt

    @property
    def fence(self) -> int:
        """The fence the attempt was started under."""
        return self._request.fence

    @property
    def secret(self) -> str:
        """The secret ``Execute`` declared (empty: none); ``Attach`` and ``Cancel`` present it."""
        return self._request.attempt_secret

    def vouches_for(self, older: Attempt) -> bool:
        """Whether this attempt may replace ``older`` (an attempt of the same step).

        True when ``older`` declared no secret, or this request's ``prior_attempt_secrets``
        holds ``older``'s secret at its position (compared in constant time).
        """
        if not older.secret:
            return True
        prior = self._request.prior_attempt_secrets
        index = older.number - 1
        return 0 <= index < min(len(prior), self.number - 1) and secrets_match(prior[index], older.secret)

    def admits_secret(self, presented: str) -> bool:
        """Whether ``presented`` is this attempt's secret (anything goes when it declared none)."""
        return not self.secret or secrets_match(presented, self.secret)

    @property
    def log(self) -> EventLog:
        """The attempt's events, for the streams that read them."""
        return self._stream.log

    @property
    def ended(self) -> bool:
        """True once the terminal event was produced."""
        return self._stream.ended

    def refuse(self, error: pb.Error) -> None:
        """End with ``failed`` ``error`` without running (the server would not start it)."""
        self._stream.failed(error)

    def end_without_outcome(self) -> None:
        """Close the log of an attempt whose task stopped before a terminal event."""
        self._stream.failed(errors.make_error(
            errors.INTERNAL, "the attempt stopped without an outcome", True
        ))

    def supersede(self, attempt: int, fence: int) -> bool:
        """A newer attempt of the step (``attempt``, ``fence``) replaces this one: stop it.

        This attempt's fence is stale from now on. True when it was still running.
        """
        self.superseded_by = (attempt, fence)
        stopping = self.stop(f"superseded by attempt {attempt} (fence {fence})")
        log.info(
            "superseded step=%s attempt=%d fence=%d by_attempt=%d by_fence=%d running=%s",
            self.step_id, self.number, self.fence, attempt, fence, stopping,
        )
        return stopping

    def stop(self, reason: str, error: pb.Error | None = None) -> bool:
        """Ask the attempt to stop; it ends with ``cancelled`` (or ``failed`` with ``error``)."""
        if self._stream.ended or self._stop_requested.is_set():
            return False
        self._stop_reason, self._stop_error = reason, error
        self._stop_requested.set()
        return True

    async def run(self) -> None:
        """Run to the end, emitting every event of the stream."""
        try:
            with telemetry.attempt_span(self._request):
                await self._run()
        except Exception as exc:  # a bug here must still end the stream
            self._fail(errors.make_error(errors.INTERNAL, "executor error", False), exc)
        finally:
            # A retained attempt keeps its ids and events, not its (possibly large) input.
            self._request.ClearField("input_json")

    async def _run(self) -> None:
        req = self._request
        log.info(
            "execute operation=%.100s step=%s attempt=%d fence=%d",
            req.operation, req.step_id, req.attempt, req.fence,
        )
        self._stream.accepted()
        found = self._resolve()
        if isinstance(found, pb.Error):
            self._fail(found)
            return
        capability, input_obj = found
        deadline = req.deadline.ToDatetime(tzinfo=UTC) if req.HasField("deadline") else None
        timeout = None if deadline is None else (deadline - datetime.now(UTC)).total_seconds()
        if timeout is not None and timeout <= 0:
            self._fail(_deadline_exceeded())
            return
        ctx = Context(
            run_id=req.run_id, step_id=req.step_id, attempt=req.attempt, fence=req.fence,
            map_index=req.map_index if req.HasField("map_index") else None,
            deadline=deadline, trace_context=dict(req.trace_context),
            artifacts_root=self._artifacts_root, events=self._stream,
        )
        self._stream.running(capability.version)
        handler = asyncio.create_task(_invoke(capability, ctx, input_obj, req))
        stop = asyncio.create_task(self._stop_requested.wait())
        try:
            done, _ = await asyncio.wait(
                {handler, stop}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            if handler in done:
                self._finish(handler)
            elif stop in done:
                self._end_stopped()
            else:
                self._fail(_deadline_exceeded())
        finally:
            stop.cancel()
            if not handler.done():
                ctx.cancelled.set()
                handler.cancel()
                _cancelled_handlers.add(handler)
                handler.add_done_callback(_forget)

    def _resolve(self) -> tuple[Capability, dict[str, object]] | pb.Error:
        req = self._request
        try:
            uuid.UUID(req.run_id)
            uuid.UUID(req.step_id)
        except ValueError:
            return errors.make_error(
                errors.INVALID_REQUEST, "run_id and step_id must be UUIDs", False
            )
        if req.attempt < 1:
            return errors.make_error(errors.INVALID_REQUEST, "attempt must be at least 1", False)
        capability = self._capability
        if capability is None:
            pinned = f" version {req.capability_version}" if req.capability_version else ""
            return errors.make_error(
                errors.UNKNOWN_OPERATION,
                f"no capability {req.operation!r}{pinned} on this executor",
                False,
                {"operation": req.operation, "capability_version": req.capability_version},
            )
        try:
            input_obj = json.loads(req.input_json) if req.input_json else {}
        except ValueError:
            return errors.make_error(errors.INVALID_INPUT, "input_json is not valid JSON", False)
        if not isinstance(input_obj, dict):
            return errors.make_error(errors.INVALID_INPUT, "input_json must be a JSON object", False)
        return capability, input_obj

    def _finish(self, handler: asyncio.Task[object]) -> None:
        if handler.cancelled():
            self._stream.cancelled(self._stop_reason or "the handler was cancelled")
            return
        exc = handler.exception()
        if exc is not None:
            self._fail(errors.to_error(exc), exc)
            return
        output = handler.result()
        try:
            if not isinstance(output, dict):
                raise TypeError("not a dict")
            output_json = json.dumps(output, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError):
            self._fail(errors.make_error(
                errors.INVALID_OUTPUT, "the handler did not return a JSON object", False
            ))
            return
        log.info("succeeded step=%s attempt=%d", self._request.step_id, self._request.attempt)
        self._stream.succeeded(output_json)

    def _end_stopped(self) -> None:
        if self._stop_error is not None:
            self._fail(self._stop_error)
        else:
            log.info("cancelled step=%s attempt=%d", self._request.step_id, self._request.attempt)
            self._stream.cancelled(self._stop_reason)

    def _fail(self, error: pb.Error, exc: BaseException | None = None) -> None:
        # Only the class of an exception is logged: its message may quote input values.
        log.warning(
            "failed step=%s attempt=%d code=%s retryable=%s exception=%s",
            self._request.step_id, self._request.attempt, error.code, error.retryable,
            type(exc).__name__ if exc is not None else "-",
        )
        self._stream.failed(error)


async def _invoke(
    capability: Capability, ctx: Context, input_obj: dict[str, object], request: pb.ExecuteRequest
) -> object:
    with telemetry.handler_span(request):
        if capability.is_async:
            return await cast(AsyncHandler, capability.handler)(ctx, input_obj)
        return await asyncio.to_thread(cast(SyncHandler, capability.handler), ctx, input_obj)


def _deadline_exceeded() -> pb.Error:
    return errors.make_error(errors.DEADLINE_EXCEEDED, "the attempt's deadline passed", True)


def _forget(task: asyncio.Task[object]) -> None:
    _cancelled_handlers.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved so asyncio does not warn; the attempt already ended
