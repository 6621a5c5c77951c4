"""The conformance capabilities: what rara's conformance suite (``shared/conformance``,
``cargo run -p rara-conformance -- http://HOST:PORT``) drives to check an executor against
every rule of the ``rara.v1`` contract. ``python -m rara_worker --conformance`` (or
``RARA_WORKER_CONFORMANCE=1``) registers them next to the examples; ``register(registry)``
adds them to any registry. Their behaviour is fixed by the proto's comments
("Conformance capabilities"):

- ``conformance.echo`` 1.0.0: progress 0.5, one artifact ``echo.json`` (the input as JSON),
  then ``{"echo": <input>}``.
- ``conformance.sleep`` 1.0.0: sleeps ``seconds`` (0 to 3600), reporting progress at once
  and every 0.2 s; ``{"slept_seconds": ...}``. Detachable.
- ``conformance.fail`` 1.0.0: fails with the error its input spells: ``code``, ``message``,
  ``retryable`` and ``details`` (string values).
- ``conformance.chatty`` 1.0.0: reports progress every 10 ms until stopped.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from rara_worker.capability import CapabilityRegistry
from rara_worker.context import Context
from rara_worker.errors import InvalidInputError, PermanentError, RetryableError

VERSION = "1.0.0"
SLEEP_PROGRESS_SECONDS = 0.2
CHATTY_PROGRESS_SECONDS = 0.01


async def echo(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    """``conformance.echo``."""
    await ctx.progress(0.5, "echoing")
    await ctx.write_artifact("echo.json", json.dumps(input, sort_keys=True), "application/json")
    return {"echo": input}


async def sleep(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    """``conformance.sleep``: stopped by cancellation (the attempt cancels this task)."""
    seconds = input.get("seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 <= seconds <= 3600:
        raise InvalidInputError('"seconds" must be a number from 0 to 3600')
    started = time.monotonic()
    while (elapsed := time.monotonic() - started) < seconds:
        await ctx.progress(elapsed / seconds, "sleeping")
        await asyncio.sleep(min(SLEEP_PROGRESS_SECONDS, seconds - elapsed))
    return {"slept_seconds": seconds}


async def fail(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    """``conformance.fail``: raises the structured error the input spells."""
    code, message = input.get("code"), input.get("message")
    retryable, details = input.get("retryable", False), input.get("details", {})
    if not isinstance(code, str) or not code or not isinstance(message, str):
        raise InvalidInputError('"code" (non-empty) and "message" must be strings')
    if not isinstance(retryable, bool):
        raise InvalidInputError('"retryable" must be a boolean')
    if not isinstance(details, dict) or not all(isinstance(v, str) for v in details.values()):
        raise InvalidInputError('"details" must be an object of strings')
    raise (RetryableError if retryable else PermanentError)(code, message, details)


async def chatty(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    """``conformance.chatty``: progress every 10 ms, forever (until stopped)."""
    tick = 0
    while True:
        await ctx.progress((tick % 100) / 100, "chatty")
        tick += 1
        await asyncio.sleep(CHATTY_PROGRESS_SECONDS)


def register(registry: CapabilityRegistry) -> None:
    """Add the four conformance capabilities to ``registry``."""
    registry.capability(
        "conformance.echo", version=VERSION, description="Conformance: echo the input."
    )(echo)
    registry.capability(
        "conformance.sleep", version=VERSION,
        input_schema={"type": "object", "properties": {"seconds": {"type": "number"}},
                      "required": ["seconds"]},
        description="Conformance: sleep, reporting progress every 0.2 s.",
    )(sleep)
    registry.capability(
        "conformance.fail", version=VERSION, description="Conformance: fail as the input says."
    )(fail)
    registry.capability(
        "conformance.chatty", version=VERSION,
        description="Conformance: report progress every 10 ms until stopped.",
    )(chatty)
