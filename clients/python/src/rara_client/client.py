"""The sync client: the operations of :class:`~rara_client.aio.AsyncClient`, blocking.

:meth:`Client.watch` is a plain iterator that drives the async watch on a private event loop
(inside async code, use :class:`~rara_client.AsyncClient` instead)."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx

from . import _calls as c
from . import types as t
from ._http import Retry, SigV4, read, request_args, settings
from .aio import AsyncClient, check_digest, raise_problems
from .errors import ConnectionFailedError, error_from
from .watch import RunFinished, WatchEvent


class Client:
    """``Client(url, token=...)``: ``url`` and ``token`` default to ``RARA_API_URL`` and
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
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        base, defaults = settings(url, token)
        headers = {**defaults, **(headers or {})}
        self._auth = SigV4() if sigv4 is True else (sigv4 or None)
        self._args = (base, headers, timeout)
        self._retry = retry or Retry()
        self._http = httpx.Client(base_url=base, headers=headers, auth=self._auth, timeout=timeout,
                                  transport=transport)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _do(self, call: c.Call[c.T]) -> c.T:
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.request(call.method, call.path, **request_args(call))
            except httpx.TransportError as e:
                if not self._retry.on_error(call, e, attempt):
                    raise ConnectionFailedError(f"{call.method} {call.path}: {e!r}") from e
                time.sleep(self._retry.delay(attempt))
                continue
            if self._retry.on_status(call, response.status_code, attempt):
                time.sleep(self._retry.delay(attempt))
                continue
            return read(call, response)

    def submit(
        self,
        definition: c.Definition,
        inputs: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        check: bool | None = None,
    ) -> t.Submitted:
        """See :meth:`AsyncClient.submit`."""
        if check if check is not None else hasattr(definition, "to_dict"):
            self.check(definition, inputs)
        return self._do(c.submit(definition, inputs, idempotency_key))

    def submit_workflow(
        self, name: str, inputs: Mapping[str, Any] | None = None, *,
        idempotency_key: str | None = None, version: int | None = None,
    ) -> t.Submitted:
        return self._do(c.submit_registered(name, inputs, idempotency_key, version))

    def validate(self, definition: c.Definition, inputs: Mapping[str, Any] | None = None) -> t.Validation:
        return self._do(c.validate(definition, inputs))

    def check(self, definition: c.Definition, inputs: Mapping[str, Any] | None = None) -> None:
        raise_problems(self.validate(definition, inputs))

    def register(self, definition: c.Definition) -> t.Registered:
        return self._do(c.register(definition))

    def get_run(self, run_id: str) -> t.Run:
        return self._do(c.get_run(run_id))

    def list_runs(
        self, *, status: str | None = None, name: str | None = None, created_after: str | None = None,
        created_before: str | None = None, limit: int | None = None, cursor: str | None = None,
    ) -> t.RunPage:
        return self._do(c.list_runs(status, name, created_after, created_before, limit, cursor))

    def iter_runs(self, **filters: Any) -> Iterator[t.RunSummary]:
        cursor = None
        while True:
            page = self.list_runs(cursor=cursor, **filters)
            yield from page["runs"]
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def cancel(self, run_id: str, reason: str | None = None) -> t.Cancelled:
        return self._do(c.cancel(run_id, reason))

    def cancel_step(self, step_id: str, reason: str | None = None) -> t.Cancelled:
        return self._do(c.cancel_step(step_id, reason))

    def retry(self, step_id: str) -> t.Retried:
        return self._do(c.retry(step_id))

    def rerun(
        self, run_id: str, from_step: str, inputs: Mapping[str, Any] | None = None, *, force: bool = False
    ) -> t.Rerun:
        return self._do(c.rerun(run_id, from_step, inputs, force))

    def signal(
        self, run_id: str, name: str, data: Any = None, *, signal_id: str | None = None, reject: str | None = None
    ) -> t.Signalled:
        return self._do(c.signal(run_id, name, data, signal_id, reject))

    def event(self, name: str, key: str, payload: Any = None, *, event_id: str | None = None) -> t.EventSent:
        return self._do(c.event(name, key, payload, event_id))

    def list_schedules(self) -> list[dict[str, Any]]:
        return self._do(c.list_schedules())

    def get_schedule(self, name: str) -> dict[str, Any]:
        return self._do(c.get_schedule(name))

    def create_schedule(self, name: str, workflow: str, **options: Any) -> dict[str, Any]:
        return self._do(c.create_schedule(name, workflow, options))

    def pause_schedule(self, name: str) -> Any:
        return self._do(c.schedule_action(name, "pause"))

    def resume_schedule(self, name: str) -> Any:
        return self._do(c.schedule_action(name, "resume"))

    def trigger_schedule(self, name: str) -> t.Fired:
        return self._do(c.schedule_action(name, "trigger"))  # type: ignore[no-any-return]

    def backfill_schedule(self, name: str, start: str, end: str) -> t.Fired:
        return self._do(c.backfill_schedule(name, start, end))

    def delete_schedule(self, name: str) -> None:
        self._do(c.delete_schedule(name))

    def download_artifact(self, artifact: t.Artifact | int, dest: str | Path) -> Path:
        """See :meth:`AsyncClient.download_artifact`."""
        artifact_id = artifact if isinstance(artifact, int) else artifact["id"]
        dest = Path(dest)
        digest = hashlib.sha256()
        with self._http.stream("GET", c.artifact_path(artifact_id), follow_redirects=True) as response:
            if response.status_code >= 400:
                response.read()
                raise error_from(response.status_code, response.json() if response.content else None)
            with dest.open("wb") as out:
                for chunk in response.iter_bytes():
                    digest.update(chunk)
                    out.write(chunk)
        check_digest(artifact, digest.hexdigest(), dest)
        return dest

    def watch(self, run_id: str, **options: Any) -> Iterator[WatchEvent]:
        """See :meth:`AsyncClient.watch`: each step change, then :class:`RunFinished`."""
        base, headers, timeout = self._args
        loop = asyncio.new_event_loop()
        client = AsyncClient(base, token="", sigv4=self._auth or False, retry=self._retry, timeout=timeout,
                             headers=headers)
        changes = client.watch(run_id, **options)
        try:
            while True:
                try:
                    yield loop.run_until_complete(changes.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            loop.run_until_complete(changes.aclose())
            loop.run_until_complete(client.aclose())
            loop.close()

    def wait(self, run_id: str) -> t.Run:
        """The run once it ended."""
        for change in self.watch(run_id):
            if isinstance(change, RunFinished):
                return change.run
        raise AssertionError("a watch ends with the run")  # pragma: no cover
