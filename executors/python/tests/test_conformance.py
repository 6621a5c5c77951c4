"""The conformance capabilities' own rules (rara's suite drives them end to end:
``cargo test -p rara-conformance``)."""

from __future__ import annotations

from typing import Any

import pytest

from rara_worker import CapabilityRegistry, InvalidInputError, PermanentError, RetryableError
from rara_worker import conformance


def test_register_adds_the_four_conformance_capabilities() -> None:
    registry = CapabilityRegistry()
    conformance.register(registry)
    assert [(c.name, c.version) for c in registry] == [
        ("conformance.chatty", "1.0.0"),
        ("conformance.echo", "1.0.0"),
        ("conformance.fail", "1.0.0"),
        ("conformance.sleep", "1.0.0"),
    ]


@pytest.mark.parametrize(("retryable", "kind"), [(True, RetryableError), (False, PermanentError)])
async def test_fail_raises_exactly_the_error_its_input_spells(
    retryable: bool, kind: type[Exception]
) -> None:
    spelled = {"code": "C", "message": "m", "retryable": retryable, "details": {"k": "v"}}
    with pytest.raises(kind) as raised:
        await conformance.fail(None, spelled)  # type: ignore[arg-type]
    error = raised.value.to_proto()  # type: ignore[attr-defined]
    assert (error.code, error.message, error.retryable, dict(error.details)) == ("C", "m", retryable, {"k": "v"})


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"code": "", "message": "m"},
        {"code": "C", "message": "m", "retryable": "yes"},
        {"code": "C", "message": "m", "details": {"k": 1}},
    ],
)
async def test_fail_refuses_an_error_it_cannot_spell(bad: dict[str, Any]) -> None:
    with pytest.raises(InvalidInputError):
        await conformance.fail(None, bad)  # type: ignore[arg-type]
