"""Shared fixtures: a real grpc.aio server on 127.0.0.1:0 and a client stub."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import grpc
import pytest
from support import make_registry

from rara.v1 import executor_pb2_grpc as pb_grpc
from rara_worker.attempts import DetachConfig
from rara_worker.server import RunningServer, start


@pytest.fixture
def cancel_seen() -> list[str]:
    return []


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """The directory the example capabilities may read ``path`` inputs from."""
    path = tmp_path / "data"
    path.mkdir()
    return path


@pytest.fixture
async def server(
    tmp_path: Path, data_dir: Path, cancel_seen: list[str]
) -> AsyncIterator[RunningServer]:
    running = await start(make_registry(cancel_seen, data_dir), artifacts_dir=tmp_path / "artifacts")
    yield running
    await running.stop(grace=0.5)


@pytest.fixture
async def stub(server: RunningServer) -> AsyncIterator[pb_grpc.ExecutorServiceStub]:
    async with grpc.aio.insecure_channel(server.address) as channel:
        yield pb_grpc.ExecutorServiceStub(channel)


@pytest.fixture
async def start_server(
    tmp_path: Path, data_dir: Path, cancel_seen: list[str]
) -> AsyncIterator[Callable[[DetachConfig], Awaitable[tuple[RunningServer, pb_grpc.ExecutorServiceStub]]]]:
    """Start a server with a given ``DetachConfig``; returns it and a stub (both closed after)."""
    servers: list[RunningServer] = []
    channels: list[grpc.aio.Channel] = []

    async def make(detach: DetachConfig) -> tuple[RunningServer, pb_grpc.ExecutorServiceStub]:
        running = await start(
            make_registry(cancel_seen, data_dir), artifacts_dir=tmp_path / "artifacts",
            detach=detach,
        )
        servers.append(running)
        channels.append(grpc.aio.insecure_channel(running.address))
        return running, pb_grpc.ExecutorServiceStub(channels[-1])

    yield make
    for channel in channels:
        await channel.close()
    for running in servers:
        await running.stop(grace=0.5)
