"""The gRPC server: ``ExecutorService`` (``rara.v1``) plus the standard health service.

``start()`` binds and starts a server, logs the capabilities it serves (name and version)
and returns a ``RunningServer`` (used by tests and embedders); ``serve()`` also prints ``listening on HOST:PORT``, waits for SIGTERM or
SIGINT and shuts down gracefully: health turns NOT_SERVING, new calls are refused,
running attempts get ``grace`` seconds to finish, then the rest end with ``failed``
``SHUTTING_DOWN`` (retryable).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from rara.v1 import executor_pb2 as pb
from rara.v1 import executor_pb2_grpc as pb_grpc
from rara_worker import errors
from rara_worker.attempt import Attempt
from rara_worker.capability import CapabilityRegistry
from rara_worker.events import EventStream

log = logging.getLogger(__name__)

SERVICE_NAME: str = pb.DESCRIPTOR.services_by_name["ExecutorService"].full_name
DEFAULT_GRACE_SECONDS = 10.0
# Time left after the grace period for terminal events to reach clients.
_FLUSH_SECONDS = 2.0


class ExecutorService(pb_grpc.ExecutorServiceServicer):
    """Serves the capabilities of one registry; tracks running attempts for ``Cancel``."""

    def __init__(self, registry: CapabilityRegistry, artifacts_dir: Path) -> None:
        self._registry = registry
        self._artifacts_dir = artifacts_dir
        self._running: dict[tuple[str, int], Attempt] = {}
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
                    input_schema=c.input_schema_json(),
                )
                for c in self._registry
            ]
        )

    async def Execute(
        self,
        request: pb.ExecuteRequest,
        context: grpc.aio.ServicerContext[pb.ExecuteRequest, pb.ExecuteResponse],
    ) -> AsyncIterator[pb.ExecuteResponse]:
        stream = EventStream()
        attempt = Attempt(request, stream, self._registry, self._artifacts_dir)
        task: asyncio.Task[None] | None = None
        if self._shutting_down:
            stream.failed(errors.make_error(
                errors.SHUTTING_DOWN, "the executor is shutting down", True
            ))
        elif attempt.key in self._running:
            stream.failed(errors.make_error(
                errors.ALREADY_RUNNING, "this step attempt is already running here", True
            ))
        else:
            self._running[attempt.key] = attempt
            task = asyncio.create_task(attempt.run())
            self._tasks.add(task)
            task.add_done_callback(lambda t: self._forget(attempt, t))
        try:
            async for event in stream.events():
                yield event
        finally:
            if task is not None and not stream.ended:
                task.cancel()  # the client went away: stop the work

    async def Cancel(
        self,
        request: pb.CancelRequest,
        context: grpc.aio.ServicerContext[pb.CancelRequest, pb.CancelResponse],
    ) -> pb.CancelResponse:
        attempt = self._running.get((request.step_id, request.attempt))
        found = attempt is not None
        if attempt is not None:
            attempt.stop(request.reason or "cancel requested")  # a repeat is a no-op
        log.info("cancel step=%s attempt=%d found=%s", request.step_id, request.attempt, found)
        return pb.CancelResponse(found=found)

    async def drain(self, grace: float) -> None:
        """Refuse new attempts, wait up to ``grace`` s, then stop what still runs."""
        self._shutting_down = True
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace)
        for attempt in list(self._running.values()):
            attempt.stop("executor shutting down", errors.make_error(
                errors.SHUTTING_DOWN, "the executor shut down before the attempt ended", True
            ))
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=_FLUSH_SECONDS)

    def _forget(self, attempt: Attempt, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if self._running.get(attempt.key) is attempt:
            del self._running[attempt.key]
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("attempt task crashed step=%s attempt=%d exception=%s",
                      attempt.key[0], attempt.key[1], type(exc).__name__)


@dataclass
class RunningServer:
    """A started server and what it takes to stop it."""

    server: grpc.aio.Server
    service: ExecutorService
    health: Any  # grpc_health.v1.health.aio.HealthServicer (untyped package)
    host: str
    port: int

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
    artifacts_dir: Path,
) -> RunningServer:
    """Bind ``host:port`` (0 picks a free port), register the services and start."""
    server = grpc.aio.server()
    service = ExecutorService(registry, artifacts_dir)
    pb_grpc.add_ExecutorServiceServicer_to_server(service, server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    bind_host = f"[{host}]" if ":" in host else host
    bound = server.add_insecure_port(f"{bind_host}:{port}")
    if bound == 0:
        raise OSError(f"could not bind {host}:{port}")
    await server.start()
    for name in ("", SERVICE_NAME):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    offered = ", ".join(f"{c.name} {c.version}" for c in registry) or "none"
    log.info("serving %d capabilities on %s:%d: %s", len(registry), host, bound, offered)
    return RunningServer(server, service, health_servicer, host, bound)


async def serve(
    registry: CapabilityRegistry,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    artifacts_dir: Path,
    grace: float = DEFAULT_GRACE_SECONDS,
) -> None:
    """Serve until SIGTERM or SIGINT, then shut down gracefully.

    The first line on stdout is ``listening on HOST:PORT`` (flushed), so a parent
    process that passed port 0 can read the port.
    """
    running = await start(registry, host=host, port=port, artifacts_dir=artifacts_dir)
    print(f"listening on {running.address}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down (grace %.1fs)", grace)
    await running.stop(grace)
    log.info("stopped")
