"""The gRPC server: ``ExecutorService`` (``rara.v1``) plus the standard health service.

``start()`` binds and starts a server, logs the capabilities it serves (name and version)
and returns a ``RunningServer`` (used by tests and embedders); ``serve()`` also prints
``listening on HOST:PORT``, waits for SIGTERM or SIGINT and shuts down gracefully: health
turns NOT_SERVING, new calls are refused, running attempts (detached ones included) get
``grace`` seconds to finish, then the rest end with ``failed`` ``SHUTTING_DOWN``
(retryable) and the log names each one it abandons.

The RPCs are glue: an attempt runs in its own task (``attempt.py``) and writes its events
into its log (``log.py``); ``Execute`` and ``Attach`` streams read that log. When an
``Execute`` stream ends before the terminal event, a non-detachable attempt is stopped
and a detachable one runs on. The attempt table (``attempts.py``) finds attempts for
``Cancel`` and ``Attach`` and retains finished detachable ones; ``attach.py`` holds the
rules of ``Attach``.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from rara.v1 import executor_pb2 as pb
from rara.v1 import executor_pb2_grpc as pb_grpc
from rara_worker import errors
from rara_worker.attach import Refused, open_attach
from rara_worker.attempt import Attempt
from rara_worker.attempts import DetachConfig, AttemptTable
from rara_worker.auth import TlsFiles, TokenInterceptor, Tokens
from rara_worker.capability import CapabilityRegistry
from rara_worker.heartbeat import with_heartbeats
from rara_worker.store import Store

log = logging.getLogger(__name__)

SERVICE_NAME: str = pb.DESCRIPTOR.services_by_name["ExecutorService"].full_name
DEFAULT_GRACE_SECONDS = 10.0
# Time left after the grace period for terminal events to reach clients.
_FLUSH_SECONDS = 2.0


class ExecutorService(pb_grpc.ExecutorServiceServicer):
    """Serves the capabilities of one registry; keeps the attempts ``Cancel`` and ``Attach`` find."""

    def __init__(
        self,
        registry: CapabilityRegistry,
        artifacts_dir: Path | Store,
        detach: DetachConfig = DetachConfig(),
    ) -> None:
        self._registry = registry
        self._artifacts_dir = artifacts_dir
        self._detach = detach
        #: Running attempts, and finished detachable ones within their retention.
        self.attempts = AttemptTable(detach.retention_seconds)
        self._tasks: set[asyncio.Task[None]] = set()
        self._shutting_down = False

    async def GetCapabilities(
        self,
        request: pb.GetCapabilitiesRequest,
        context: grpc.aio.ServicerContext[pb.GetCapabilitiesRequest, pb.GetCapabilitiesResponse],
    ) -> pb.GetCapabilitiesResponse:
        return pb.GetCapabilitiesResponse(
            capabilities=[
                pb.Capability(
                    name=c.name, version=c.version, description=c.description,
                    input_schema=c.input_schema_json(), detachable=c.detachable,
                )
                for c in self._registry
            ]
        )

    async def Execute(
        self,
        request: pb.ExecuteRequest,
        context: grpc.aio.ServicerContext[pb.ExecuteRequest, pb.ExecuteResponse],
    ) -> AsyncIterator[pb.ExecuteResponse]:
        attempt = Attempt(
            request, self._registry, self._artifacts_dir,
            max_kept_events=self._detach.max_kept_events,
        )
        task: asyncio.Task[None] | None = None
        refusal = (
            errors.make_error(errors.SHUTTING_DOWN, "the executor is shutting down", True)
            if self._shutting_down
            else self.attempts.admit(attempt)
        )
        if refusal is not None:
            log.info(
                "refused step=%.100s attempt=%d fence=%d code=%s",
                request.step_id, request.attempt, request.fence, refusal.code,
            )
            attempt.refuse(refusal)
        else:
            task = asyncio.create_task(attempt.run())
            self._tasks.add(task)
            task.add_done_callback(lambda t: self._finished(attempt, t))
        try:
            async with aclosing(attempt.log.attach(0)) as events:
                async for event in with_heartbeats(events, request.heartbeat_interval_ms):
                    yield event
        finally:
            if task is not None and not attempt.ended:
                if attempt.detachable:
                    _log_detached(attempt)  # the attempt runs on; Attach resumes it
                else:
                    task.cancel()  # the client went away: stop the work

    async def Attach(
        self,
        request: pb.AttachRequest,
        context: grpc.aio.ServicerContext[pb.AttachRequest, pb.ExecuteResponse],
    ) -> AsyncIterator[pb.ExecuteResponse]:
        try:
            attempt, reader = open_attach(self.attempts, request)
        except Refused as refused:
            log.info(
                "attach refused step=%.100s attempt=%d fence=%d after=%d status=%s",
                request.step_id, request.attempt, request.fence, request.after_sequence,
                refused.status.name,
            )
            await context.abort(refused.status, refused.message)
        log.info(
            "attach step=%s attempt=%d fence=%d after=%d last=%d ended=%s",
            attempt.step_id, attempt.number, attempt.fence, request.after_sequence,
            attempt.log.last_sequence, attempt.ended,
        )
        async with aclosing(reader) as events:
            async for event in with_heartbeats(events, request.heartbeat_interval_ms):
                yield event
        if not attempt.ended:
            _log_detached(attempt)  # superseded by a newer Attach, or the client went away

    async def Cancel(
        self,
        request: pb.CancelRequest,
        context: grpc.aio.ServicerContext[pb.CancelRequest, pb.CancelResponse],
    ) -> pb.CancelResponse:
        attempt = self.attempts.get(request.step_id, request.attempt)
        if attempt is not None and not attempt.admits_secret(request.attempt_secret):
            log.warning("cancel refused (not the attempt's secret) step=%s attempt=%d",
                        request.step_id, request.attempt)
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED, "attempt_secret is not this attempt's secret"
            )
        found = attempt is not None and not attempt.ended
        if attempt is not None and found:
            attempt.stop(request.reason or "cancel requested")  # a repeat is a no-op
        log.info(
            "cancel step=%s attempt=%d found=%s reason=%r", request.step_id, request.attempt, found, request.reason
        )
        return pb.CancelResponse(found=found)

    async def drain(self, grace: float) -> None:
        """Refuse new attempts, wait up to ``grace`` s, then stop what still runs.

        Each attempt stopped ends with ``failed`` ``SHUTTING_DOWN`` (retryable); the log
        names each one, and whether it was detached (no stream to tell).
        """
        self._shutting_down = True
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace)
        for attempt in self.attempts.running():
            log.warning(
                "shutdown abandons step=%s attempt=%d fence=%d detached=%s",
                attempt.step_id, attempt.number, attempt.fence, not attempt.log.attached,
            )
            attempt.stop("executor shutting down", errors.make_error(
                errors.SHUTTING_DOWN, "the executor shut down before the attempt ended", True
            ))
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=_FLUSH_SECONDS)
        self.attempts.close()

    def _finished(self, attempt: Attempt, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("attempt task crashed step=%s attempt=%d exception=%s",
                      attempt.step_id, attempt.number, type(exc).__name__)
        if not attempt.ended:
            attempt.end_without_outcome()  # a reader must never wait for an end that never comes
        self.attempts.finished(attempt)


def _log_detached(attempt: Attempt) -> None:
    """A stream of a running detachable attempt ended: say whether another replaced it."""
    log.info(
        "%s step=%s attempt=%d fence=%d last=%d kept=%d",
        "stream superseded" if attempt.log.attached else "detached",
        attempt.step_id, attempt.number, attempt.fence, attempt.log.last_sequence,
        len(attempt.log.kept()),
    )


@dataclass
class RunningServer:
    """A started server and what it takes to stop it."""

    server: grpc.aio.Server
    service: ExecutorService
    health: Any  # grpc_health.v1.health.aio.HealthServicer (untyped package)
    host: str
    port: int
    #: The token check, when the server has one (its ``refused`` counts refused calls).
    interceptor: TokenInterceptor | None = None

    @property
    def address(self) -> str:
        """``host:port`` to dial."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    async def stop(self, grace: float = DEFAULT_GRACE_SECONDS) -> None:
        """Graceful shutdown (see the module docstring)."""
        await self.health.enter_graceful_shutdown()
        stopping = asyncio.create_task(self.server.stop(grace + _FLUSH_SECONDS))
        await self.service.drain(grace)
        await stopping


async def start(
    registry: CapabilityRegistry,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    artifacts_dir: Path | Store,
    detach: DetachConfig = DetachConfig(),
    tokens: Tokens | None = None,
    tls: TlsFiles | None = None,
) -> RunningServer:
    """Bind ``host:port`` (0 picks a free port), register the services and start.

    With ``tokens``, every ``rara.v1`` call must carry one of them (``auth.py``); with
    ``tls``, the port serves TLS (mTLS when it names a client CA), else plaintext.
    """
    interceptor = TokenInterceptor(tokens) if tokens is not None else None
    server = grpc.aio.server(interceptors=[interceptor] if interceptor is not None else None)
    service = ExecutorService(registry, artifacts_dir, detach)
    pb_grpc.add_ExecutorServiceServicer_to_server(service, server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    bind_host = f"[{host}]" if ":" in host else host
    address = f"{bind_host}:{port}"
    bound = (server.add_secure_port(address, tls.credentials()) if tls is not None
             else server.add_insecure_port(address))
    if bound == 0:
        raise OSError(f"could not bind {host}:{port}")
    await server.start()
    for name in ("", SERVICE_NAME):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    offered = ", ".join(f"{c.name} {c.version}" for c in registry) or "none"
    log.info(
        "detached attempts: finished ones retained %gs, at most %d events kept while detached",
        detach.retention_seconds, detach.max_kept_events,
    )
    log.info(
        "serving %d capabilities on %s:%d (%s, %s): %s", len(registry), host, bound,
        "TLS" + (" with client certificates" if tls is not None and tls.client_ca else "")
        if tls is not None else "plaintext",
        f"{len(tokens)} accepted token(s)" if tokens is not None else "NO authentication",
        offered,
    )
    return RunningServer(server, service, health_servicer, host, bound, interceptor)


async def serve(
    registry: CapabilityRegistry,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    artifacts_dir: Path | Store,
    grace: float = DEFAULT_GRACE_SECONDS,
    detach: DetachConfig = DetachConfig(),
    tokens: Tokens | None = None,
    tls: TlsFiles | None = None,
) -> None:
    """Serve until SIGTERM or SIGINT, then shut down gracefully.

    The first line on stdout is ``listening on HOST:PORT`` (flushed), so a parent
    process that passed port 0 can read the port.
    """
    running = await start(
        registry, host=host, port=port, artifacts_dir=artifacts_dir, detach=detach,
        tokens=tokens, tls=tls,
    )
    print(f"listening on {running.address}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down (grace %.1fs)", grace)
    await running.stop(grace)
    log.info("stopped")
