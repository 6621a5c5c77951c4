"""The async client (httpx): every operation of the API, typed errors, retries for idempotent
calls, and :meth:`AsyncClient.watch`, an async iterator of a run's step changes."""

from __future__ import annotations

import asyncio
import hashlib
import time
from contextlib import aclosing
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx

from . import _calls as c
from . import types as t
from ._http import Retry, SigV4, read, request_args, settings
from .errors import ConnectionFailedError, InvalidWorkflowError, RaraError, WatchError, error_from
from .watch import EventLines, RunFinished, WatchEvent, changes


class AsyncClient:
    """``AsyncClient(url, token=...)``: ``url`` and ``token`` default to ``RARA_API_URL`` and
    ``RARA_API_TOKEN``; ``sigv4=True`` (or a :class:`SigV4`) signs requests for an IAM function
    URL instead; ``headers`` are sent with every request."""

    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        sigv4: SigV4 | bool = False,
        retry: Retry | None = None,
        timeout: float = 30.0,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        base, defaults = settings(url, token)
        headers = {**defaults, **(headers or {})}
        auth = SigV4() if sigv4 is True else (sigv4 or None)
        self._retry = retry or Retry()
        self._http = httpx.AsyncClient(base_url=base, headers=headers, auth=auth, timeout=timeout,
                                       transport=transport)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _do(self, call: c.Call[c.T]) -> c.T:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._http.request(call.method, call.path, **request_args(call))
            except httpx.TransportError as e:
                if not self._retry.on_error(call, e, attempt):
                    raise ConnectionFailedError(f"{call.method} {call.path}: {e!r}") from e
                await asyncio.sleep(self._retry.delay(attempt))
                continue
            if self._retry.on_status(call, response.status_code, attempt):
                await asyncio.sleep(self._retry.delay(attempt))
                continue
            return read(call, response)

    # Runs.

    async def submit(
        self,
        definition: c.Definition,
        inputs: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        check: bool | None = None,
    ) -> t.Submitted:
        """Submit a definition (built in code, a dict, a file or its text). A workflow built in
        code is first checked by the server (``check``), so a wrong reference raises
        :class:`InvalidWorkflowError` with its field before anything is submitted."""
        if check if check is not None else hasattr(definition, "to_dict"):
            await self.check(definition, inputs)
        return await self._do(c.submit(definition, inputs, idempotency_key))

    async def submit_workflow(
        self, name: str, inputs: Mapping[str, Any] | None = None, *,
        idempotency_key: str | None = None, version: int | None = None,
    ) -> t.Submitted:
        """Submit a run of a registered workflow (its newest version unless ``version``)."""
        return await self._do(c.submit_registered(name, inputs, idempotency_key, version))

    async def validate(self, definition: c.Definition, inputs: Mapping[str, Any] | None = None) -> t.Validation:
        """The server's checks of a definition (and of ``inputs`` when given); nothing is stored."""
        return await self._do(c.validate(definition, inputs))

    async def check(self, definition: c.Definition, inputs: Mapping[str, Any] | None = None) -> None:
        """:meth:`validate`, raising :class:`InvalidWorkflowError` (the first problem's field)."""
        raise_problems(await self.validate(definition, inputs))

    async def register(self, definition: c.Definition) -> t.Registered:
        return await self._do(c.register(definition))

    async def get_run(self, run_id: str) -> t.Run:
        return await self._do(c.get_run(run_id))

    async def list_runs(
        self, *, status: str | None = None, name: str | None = None, created_after: str | None = None,
        created_before: str | None = None, limit: int | None = None, cursor: str | None = None,
    ) -> t.RunPage:
        """One page of runs, newest first; pass its ``next_cursor`` as ``cursor`` for the next."""
        return await self._do(c.list_runs(status, name, created_after, created_before, limit, cursor))

    async def iter_runs(self, **filters: Any) -> AsyncIterator[t.RunSummary]:
        """Every run the filters match, page after page."""
        cursor = None
        while True:
            page = await self.list_runs(cursor=cursor, **filters)
            for run in page["runs"]:
                yield run
            cursor = page.get("next_cursor")
            if not cursor:
                return

    async def cancel(self, run_id: str, reason: str | None = None) -> t.Cancelled:
        return await self._do(c.cancel(run_id, reason))

    async def cancel_step(self, step_id: str, reason: str | None = None) -> t.Cancelled:
        return await self._do(c.cancel_step(step_id, reason))

    async def retry(self, step_id: str) -> t.Retried:
        return await self._do(c.retry(step_id))

    async def rerun(
        self, run_id: str, from_step: str, inputs: Mapping[str, Any] | None = None, *, force: bool = False
    ) -> t.Rerun:
        return await self._do(c.rerun(run_id, from_step, inputs, force))

    async def signal(
        self, run_id: str, name: str, data: Any = None, *, signal_id: str | None = None, reject: str | None = None
    ) -> t.Signalled:
        return await self._do(c.signal(run_id, name, data, signal_id, reject))

    async def event(self, name: str, key: str, payload: Any = None, *, event_id: str | None = None) -> t.EventSent:
        return await self._do(c.event(name, key, payload, event_id))

    # Schedules.

    async def list_schedules(self) -> list[dict[str, Any]]:
        return await self._do(c.list_schedules())

    async def get_schedule(self, name: str) -> dict[str, Any]:
        return await self._do(c.get_schedule(name))

    async def create_schedule(self, name: str, workflow: str, **options: Any) -> dict[str, Any]:
        """``options``: ``cron`` or ``every_seconds``, ``timezone``, ``inputs``, ``overlap``,
        ``catchup_window_seconds``, ``jitter_seconds``."""
        return await self._do(c.create_schedule(name, workflow, options))

    async def pause_schedule(self, name: str) -> Any:
        return await self._do(c.schedule_action(name, "pause"))

    async def resume_schedule(self, name: str) -> Any:
        return await self._do(c.schedule_action(name, "resume"))

    async def trigger_schedule(self, name: str) -> t.Fired:
        return await self._do(c.schedule_action(name, "trigger"))

    async def backfill_schedule(self, name: str, start: str, end: str) -> t.Fired:
        return await self._do(c.backfill_schedule(name, start, end))

    async def delete_schedule(self, name: str) -> None:
        await self._do(c.delete_schedule(name))

    # Artifacts.

    async def download_artifact(self, artifact: t.Artifact | int, dest: str | Path) -> Path:
        """Write an artifact to ``dest`` (following S3's presigned redirect, which gets no
        token); given the artifact itself, its digest is checked."""
        artifact_id = artifact if isinstance(artifact, int) else artifact["id"]
        dest = Path(dest)
        digest = hashlib.sha256()
        async with self._http.stream("GET", c.artifact_path(artifact_id), follow_redirects=True) as response:
            if response.status_code >= 400:
                await response.aread()
                raise error_from(response.status_code, _json(response))
            with dest.open("wb") as out:
                async for chunk in response.aiter_bytes():
                    digest.update(chunk)
                    out.write(chunk)
        check_digest(artifact, digest.hexdigest(), dest)
        return dest

    # Watching.

    async def watch(
        self, run_id: str, *, poll_interval: float = 1.0, resync_after: float = 30.0, max_reconnects: int = 20
    ) -> AsyncGenerator[WatchEvent]:
        """Each step change of the run, then :class:`RunFinished` (see :mod:`rara_client.watch`)."""
        run = await self.get_run(run_id)
        for change in changes(None, run):
            yield change
        failures = 0
        while run["status"] not in t.RUN_FINISHED:
            try:
                async with aclosing(self._live_reads(run_id, poll_interval, resync_after)) as reads:
                    async for new in reads:
                        failures = 0
                        for change in changes(run, new):
                            yield change
                        run = new
                        if run["status"] in t.RUN_FINISHED:
                            return
            except (httpx.TransportError, ConnectionFailedError) as e:
                failures += 1
                if failures > max_reconnects:
                    raise WatchError(f"watching {run_id}: gave up after {failures - 1} reconnects") from e
                await asyncio.sleep(Retry().delay(min(failures, 6)))

    async def _live_reads(self, run_id: str, poll_interval: float, resync_after: float) -> AsyncGenerator[t.Run]:
        """The run, read again each time the live stream says it changed (and once on connect,
        and after ``resync_after`` seconds of quiet); read every ``poll_interval`` seconds where
        there is no stream."""
        headers = {"accept": "text/event-stream"}
        timeout = httpx.Timeout(10.0, read=resync_after)
        async with self._http.stream("GET", f"/runs/{c.seg(run_id)}/events", headers=headers, timeout=timeout) as r:
            if r.status_code != 200 or not r.headers.get("content-type", "").startswith("text/event-stream"):
                while True:
                    yield await self.get_run(run_id)
                    await asyncio.sleep(poll_interval)
            yield await self.get_run(run_id)
            lines, last = EventLines(), time.monotonic()
            async for line in r.aiter_lines():
                if lines.feed(line) or time.monotonic() - last > resync_after:
                    last = time.monotonic()
                    yield await self.get_run(run_id)

    async def wait(self, run_id: str) -> t.Run:
        """The run once it ended."""
        async for change in self.watch(run_id):
            if isinstance(change, RunFinished):
                return change.run
        raise WatchError(f"watching {run_id} ended before the run")  # pragma: no cover


def raise_problems(validation: t.Validation) -> None:
    if validation["valid"]:
        return
    problems = validation["problems"]
    first = problems[0] if problems else {"field": "definition", "message": "invalid", "path": ""}
    lines = "\n".join(f"  - {p['path'] or '(definition)'}: {p['message']}" for p in problems)
    raise InvalidWorkflowError(f"the definition is invalid:\n{lines}", problems=list(problems),
                               field=first["field"], exit_code=4, status=200)


def check_digest(artifact: t.Artifact | int, hexdigest: str, dest: Path) -> None:
    if isinstance(artifact, int) or not artifact.get("digest"):
        return
    want = str(artifact["digest"]).removeprefix("sha256:")
    if want != hexdigest:
        dest.unlink(missing_ok=True)
        raise RaraError(f"artifact {artifact['id']}: sha256 {hexdigest} is not the recorded {want}")


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None
