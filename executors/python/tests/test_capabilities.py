"""GetCapabilities and the registry's rules."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rara.v1 import executor_pb2 as pb
from rara.v1 import executor_pb2_grpc as pb_grpc
from rara_worker import CapabilityRegistry, Context, DuplicateCapabilityError


async def test_capabilities_list_names_versions_and_schemas(
    stub: pb_grpc.ExecutorServiceStub,
) -> None:
    response = await stub.GetCapabilities(pb.GetCapabilitiesRequest())
    offered = {(c.name, c.version): c for c in response.capabilities}
    for name in ("text.stats", "text.split", "stats.merge", "dataset.split", "sleep"):
        cap = offered[(name, "1.0.0")]
        assert cap.description
        assert json.loads(cap.input_schema)["type"] == "object"
    assert ("versioned", "1.2.0") in offered and ("versioned", "1.10.0") in offered
    assert not offered[("fail.value", "1.0.0")].HasField("input_schema")


def test_registering_the_same_name_and_version_twice_is_an_error() -> None:
    reg = CapabilityRegistry()

    @reg.capability("x", version="1.0.0")
    async def first(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        return {}

    with pytest.raises(DuplicateCapabilityError):

        @reg.capability("x", version="1.0.0")
        async def second(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
            return {}

    @reg.capability("x", version="1.1.0")
    async def other_version(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        return {}

    assert [c.version for c in reg] == ["1.0.0", "1.1.0"]


def test_resolve_picks_the_pinned_or_else_the_numerically_newest_version() -> None:
    reg = CapabilityRegistry()
    for version in ("1.9.0", "1.10.0", "1.2.0"):
        reg.capability("op", version=version)(lambda ctx, input: {})
    newest = reg.resolve("op")
    assert newest is not None and newest.version == "1.10.0"
    pinned = reg.resolve("op", "1.9.0")
    assert pinned is not None and pinned.version == "1.9.0"
    assert reg.resolve("op", "2.0.0") is None
    assert reg.resolve("nope") is None
