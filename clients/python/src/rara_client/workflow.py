"""Workflows defined in code: a small builder whose :meth:`Workflow.to_dict` is exactly the
JSON definition a YAML file would give.

.. code-block:: python

    wf = Workflow("nightly-report", inputs={"url": Input(str)})
    fetch = wf.step("fetch", "http.request", input={"url": wf.input("/url")})
    split = wf.step("split", "text.split", input={"text": fetch.output("/body")})
    wf.step("stats", "text.stats", for_each=split.output("/parts"), input={"text": item("/text")})

A step that takes another's output or artifact depends on it: ``depends_on`` is inferred from
the references (explicit ``depends_on`` comes first, then each referenced step once, in the
order met). Nothing is checked here that the server checks: :meth:`Client.submit` sends a
workflow built in code to ``POST /api/workflows/validate`` first, and a wrong reference is an
:class:`~rara_client.errors.InvalidWorkflowError` with its field path before anything is
submitted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object",
                          list: "array"}
_MISSING: Any = object()


class Input:
    """A declared run input: ``Input(str)``, ``Input(int, default=5)``; a type is a Python type
    or the definition's name for it (``"string"``, ``"integer"``, ``"number"``, ...)."""

    def __init__(self, type: type | str, default: Any = _MISSING, description: str | None = None) -> None:
        self.type = _TYPES.get(type, type) if not isinstance(type, str) else type
        if not isinstance(self.type, str):
            raise TypeError(f"an input's type is one of {sorted(_TYPES.values())}, not {type!r}")
        self.default = default
        self.description = description

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.default is not _MISSING:
            out["default"] = self.default
        if self.description is not None:
            out["description"] = self.description
        return out


@dataclass(frozen=True)
class Ref:
    """A reference in a step's input: a step's output or artifact, a run input, a map's item."""

    kind: str
    target: str
    step: StepRef | None = None
    pointer: str | None = None

    def to_json(self) -> dict[str, str]:
        if self.kind == "$artifact":
            return {"$artifact": self.target, "name": self.pointer or ""}
        if self.kind == "$output":
            return {"$output": self.target} if self.pointer is None else {"$output": self.target,
                                                                          "pointer": self.pointer}
        return {self.kind: self.target}


class StepRef:
    """A step of a workflow, as :meth:`Workflow.step` returns it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def output(self, pointer: str | None = None) -> Ref:
        """The step's output, or the part of it at a JSON Pointer (``"/body"``)."""
        return Ref("$output", self.name, self, pointer)

    def artifact(self, name: str) -> Ref:
        """The descriptor of the step's artifact ``name``."""
        return Ref("$artifact", self.name, self, name)

    def __repr__(self) -> str:
        return f"StepRef({self.name!r})"


def item(pointer: str = "") -> Ref:
    """In a map step's input: the element (``""``), or the part of it at a JSON Pointer."""
    return Ref("$item", pointer)


class Workflow:
    """A workflow definition built in code."""

    def __init__(
        self,
        name: str,
        inputs: Mapping[str, Input] | None = None,
        *,
        output: Any = None,
        idempotency_key: str | None = None,
        timeout_seconds: int | None = None,
    ) -> None:
        self.name = name
        self.inputs = dict(inputs or {})
        self.output = output
        self.idempotency_key = idempotency_key
        self.timeout_seconds = timeout_seconds
        self._steps: list[dict[str, Any]] = []

    def input(self, pointer: str) -> Ref:
        """The run's inputs at a JSON Pointer (``"/date"``)."""
        return Ref("$input", pointer)

    def step(
        self,
        name: str,
        operation: str,
        *,
        input: Any = None,
        depends_on: Iterable[StepRef | str] = (),
        for_each: Any = None,
        version: str | None = None,
        **fields: Any,
    ) -> StepRef:
        """Add a step; ``fields`` are the definition's other step fields as they are written
        (``max_attempts``, ``retry``, ``timeout_seconds``, ``max_concurrency``, ``priority``, ...)."""
        step: dict[str, Any] = {"name": name, "operation": operation}
        if version is not None:
            step["version"] = version
        if input is not None:
            step["input"] = input
        if for_each is not None:
            step["for_each"] = for_each
        step.update(fields)
        named = [d.name if isinstance(d, StepRef) else d for d in depends_on]
        for ref in _refs((input, for_each)):
            if ref.step is not None and ref.target not in named:
                named.append(ref.target)
        if named:
            step["depends_on"] = named
        self._steps.append(step)
        return StepRef(name)

    def to_dict(self) -> dict[str, Any]:
        """The JSON definition (what ``POST /api/runs`` takes, what a YAML file reads as)."""
        out: dict[str, Any] = {"name": self.name}
        if self.idempotency_key is not None:
            out["idempotency_key"] = self.idempotency_key
        if self.inputs:
            out["inputs"] = {k: v.to_dict() for k, v in self.inputs.items()}
        if self.output is not None:
            out["output"] = _plain(self.output)
        if self.timeout_seconds is not None:
            out["timeout_seconds"] = self.timeout_seconds
        out["steps"] = [_plain(step) for step in self._steps]
        return out

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def save(self, path: str | Path) -> Path:
        """Write the definition as JSON (``rara submit FILE.json`` reads it)."""
        path = Path(path)
        path.write_text(self.to_json() + "\n", encoding="utf-8")
        return path


def _refs(value: Any) -> Iterable[Ref]:
    if isinstance(value, Ref):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _refs(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _refs(v)


def _plain(value: Any) -> Any:
    """The JSON value: references as their objects; anything not JSON refused."""
    if isinstance(value, Ref):
        return value.to_json()
    if isinstance(value, StepRef):
        raise TypeError(f"{value!r} is a step, not a value: use {value.name}.output() or .artifact(name)")
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"{type(value).__name__} is not a JSON value")
