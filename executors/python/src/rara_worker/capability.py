"""The capability registry: which operations this executor runs, at which versions.

Register a handler with the decorator::

    registry = CapabilityRegistry()

    @registry.capability("text.stats", version="1.0.0", description="Count words")
    async def text_stats(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        ...

A handler takes the context and the input object and returns the output object. An
``async def`` runs on the server's event loop; a plain ``def`` runs in a worker thread.

A capability is *detachable* unless registered with ``detachable=False``: its attempts
may outlive their ``Execute`` stream when rara asks (``ExecuteRequest.detachable``) and
are resumed with ``Attach``. Opt out for work that must not run unobserved, e.g. a
handler that holds a resource only the caller's invocation may hold.

Versions are SemVer 2.0 (``MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]``, semver.org). A step that
pins no version runs the newest: the highest SemVer precedence (build metadata ignored; equal
precedence is ordered by the text). The rule is the Rust router's too (``rara_remote::version``),
checked on both sides against one table, ``tests/fixtures/capability-versions.json``. An invalid
version ranks below every valid one there; this registry refuses to register one at all.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import semver

from rara_worker.context import Context

JsonObject = dict[str, Any]
AsyncHandler = Callable[[Context, JsonObject], Awaitable[JsonObject]]
SyncHandler = Callable[[Context, JsonObject], JsonObject]
Handler = AsyncHandler | SyncHandler
H = TypeVar("H", bound=Handler)


class DuplicateCapabilityError(ValueError):
    """A capability with the same name and version is already registered."""


@dataclass(frozen=True)
class Capability:
    """One operation at one version, and the function that runs it."""

    name: str
    version: str
    description: str
    input_schema: Mapping[str, Any] | None
    handler: Handler
    #: Attempts may outlive their ``Execute`` stream (advertised in ``GetCapabilities``).
    detachable: bool = True

    @property
    def is_async(self) -> bool:
        """True when the handler is an ``async def`` (run on the loop, not a thread)."""
        return inspect.iscoroutinefunction(self.handler)

    def input_schema_json(self) -> str | None:
        """The input schema as canonical JSON text, or None."""
        if self.input_schema is None:
            return None
        return json.dumps(self.input_schema, sort_keys=True, separators=(",", ":"))


def parse_version(version: str) -> semver.Version | None:
    """The SemVer 2.0 version ``version`` spells, or None when it is not one."""
    try:
        return semver.Version.parse(version)
    except (TypeError, ValueError):
        return None


def compare_versions(a: str, b: str) -> int:
    """Negative, zero or positive as ``a`` is older than, the same as or newer than ``b``.

    SemVer precedence first (build metadata ignored), then the text; every invalid version
    is older than every valid one.
    """
    parsed_a, parsed_b = parse_version(a), parse_version(b)
    if parsed_a is not None and parsed_b is not None:
        by_precedence = parsed_a.compare(parsed_b)
        if by_precedence:
            return by_precedence
    elif parsed_a is not None:
        return 1
    elif parsed_b is not None:
        return -1
    return (a > b) - (a < b)


version_key = functools.cmp_to_key(compare_versions)
"""A sort key for version strings: ``sorted(versions, key=version_key)`` is oldest first."""


class CapabilityRegistry:
    """Capabilities by (name, version). Registration is explicit; there is no discovery."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, str], Capability] = {}

    def capability(
        self,
        name: str,
        *,
        version: str,
        description: str = "",
        input_schema: Mapping[str, Any] | None = None,
        detachable: bool = True,
    ) -> Callable[[H], H]:
        """Decorator: register the function as ``name`` at ``version``.

        ``detachable=False`` keeps every attempt tied to its ``Execute`` stream.
        """

        def register(handler: H) -> H:
            self.register(
                Capability(name, version, description, input_schema, handler, detachable)
            )
            return handler

        return register

    def register(self, capability: Capability) -> None:
        """Add a capability; a second one with the same name and version is an error."""
        if not capability.name or not capability.version:
            raise ValueError("a capability needs a non-empty name and version")
        if parse_version(capability.version) is None:
            raise ValueError(
                f"capability {capability.name} version {capability.version!r} is not a semantic "
                "version (MAJOR.MINOR.PATCH, e.g. 1.0.0; see semver.org)"
            )
        if not callable(capability.handler):
            raise TypeError(f"handler of {capability.name} is not callable")
        key = (capability.name, capability.version)
        if key in self._by_key:
            raise DuplicateCapabilityError(
                f"capability {capability.name} version {capability.version} is already registered"
            )
        self._by_key[key] = capability

    def resolve(self, name: str, version: str = "") -> Capability | None:
        """The capability for ``name`` at ``version``; an empty version means the newest."""
        if version:
            return self._by_key.get((name, version))
        candidates = [c for c in self._by_key.values() if c.name == name]
        return max(candidates, key=lambda c: version_key(c.version), default=None)

    def __iter__(self) -> Iterator[Capability]:
        """Capabilities sorted by name, then version."""
        return iter(sorted(self._by_key.values(), key=lambda c: (c.name, version_key(c.version))))

    def __len__(self) -> int:
        return len(self._by_key)
