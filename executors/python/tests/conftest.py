"""Shared fixtures: a real grpc.aio server on 127.0.0.1:0 and a client stub."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from support import make_registry

from rara.v1 import executor_pb2_grpc as pb_grpc
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
