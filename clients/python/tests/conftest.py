"""Fixtures: a live ``rara ui`` for the session (``stack``), ``rara dev`` executing on it
(``executing``), and clients of it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from rara_client import AsyncClient, Client

from .stack import Stack, rara_dev, rara_ui


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with rara_ui(Path(tmp_path_factory.mktemp("stack"))) as live:
        yield live


@pytest.fixture(scope="session")
def executing(stack: Stack) -> Iterator[Stack]:
    with rara_dev(stack):
        yield stack


@pytest.fixture
def client(stack: Stack) -> Iterator[Client]:
    with Client(stack.url, token=stack.token) as rara:
        yield rara


@pytest_asyncio.fixture
async def aclient(stack: Stack) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(stack.url, token=stack.token) as rara:
        yield rara
