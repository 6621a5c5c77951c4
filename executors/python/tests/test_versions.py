"""Capability versions order as the shared table says (the Rust router reads the same one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rara_worker import CapabilityRegistry
from rara_worker.capability import compare_versions, parse_version, version_key

TABLE_PATH = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "capability-versions.json"
TABLE: dict[str, Any] = json.loads(TABLE_PATH.read_text(encoding="utf-8"))


@pytest.mark.parametrize("version", TABLE["valid"])
def test_valid_versions_parse(version: str) -> None:
    assert parse_version(version) is not None


@pytest.mark.parametrize("version", TABLE["invalid"])
def test_invalid_versions_do_not_parse_and_rank_below_every_valid_one(version: str) -> None:
    assert parse_version(version) is None
    for valid in TABLE["valid"]:
        assert compare_versions(version, valid) < 0 < compare_versions(valid, version)


@pytest.mark.parametrize("case", TABLE["cases"], ids=lambda c: str(c["name"]))
def test_versions_sort_as_the_table_says(case: dict[str, Any]) -> None:
    for given in (case["versions"], list(reversed(case["versions"])), case["order"]):
        assert sorted(given, key=version_key) == case["order"]
        assert max(given, key=version_key) == case["newest"]
    for i, a in enumerate(case["order"]):
        for j, b in enumerate(case["order"]):
            assert (compare_versions(a, b) > 0) - (compare_versions(a, b) < 0) == (i > j) - (i < j)


@pytest.mark.parametrize("case", TABLE["cases"], ids=lambda c: str(c["name"]))
def test_an_unpinned_step_resolves_to_the_newest_valid_version(case: dict[str, Any]) -> None:
    reg = CapabilityRegistry()
    valid = [v for v in case["versions"] if parse_version(v) is not None]
    for version in valid:
        reg.capability("op", version=version)(lambda ctx, input: {})
    resolved = reg.resolve("op")
    if not valid:
        assert resolved is None
        return
    assert resolved is not None
    assert resolved.version == max(valid, key=version_key)
    assert [c.version for c in reg] == [v for v in case["order"] if v in valid]


@pytest.mark.parametrize("version", ["1.x", "1.10", "v1.0.0", "latest"])
def test_registering_an_invalid_version_is_refused_with_the_reason(version: str) -> None:
    reg = CapabilityRegistry()
    with pytest.raises(ValueError, match="not a semantic version"):
        reg.capability("op", version=version)(lambda ctx, input: {})
    assert len(reg) == 0
