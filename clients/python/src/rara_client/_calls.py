"""Every operation as a :class:`Call`: what to send and how to read the answer, written once
for the sync and the async client (``client.py``, ``aio.py``), which only carry them out."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar, cast
from urllib.parse import quote

from . import types as t

T = TypeVar("T")


class Buildable(Protocol):
    """A workflow built in code (:class:`rara_client.Workflow`)."""

    def to_dict(self) -> dict[str, Any]: ...


#: A definition as the client takes it: built in code, a dict (the JSON definition), a file
#: (a :class:`~pathlib.Path`, or a ``str`` ending in ``.yaml``, ``.yml`` or ``.json``) or
#: the definition's YAML or JSON text.
Definition = Buildable | Mapping[str, Any] | str | os.PathLike[str]


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    parse: Callable[[Any], T]
    body: Any = None
    params: dict[str, str] = field(default_factory=dict)
    #: Safe to send again after a 5xx or a connection lost mid-request (a connection refused
    #: is always retried: nothing was sent).
    idempotent: bool = False


def _same(value: Any) -> Any:
    return value


def _typed(kind: type[T]) -> Callable[[Any], T]:
    return lambda value: cast(T, value)


def _none(_: Any) -> None:
    return None


def seg(value: str) -> str:
    """One path segment, escaped."""
    return quote(str(value), safe="")


def definition_body(definition: Definition) -> Any:
    """A definition as the API takes it: a JSON object, or its text."""
    if hasattr(definition, "to_dict"):
        return cast(Buildable, definition).to_dict()
    if isinstance(definition, Mapping):
        return dict(definition)
    if isinstance(definition, os.PathLike) or (
        isinstance(definition, str) and "\n" not in definition and definition.endswith((".yaml", ".yml", ".json"))
    ):
        path = Path(definition)
        text = path.read_text(encoding="utf-8")
        return json.loads(text) if path.suffix == ".json" else text
    return definition


def _drop_none(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def submit(definition: Definition, inputs: Mapping[str, Any] | None, idempotency_key: str | None) -> Call[t.Submitted]:
    body = _drop_none({"definition": definition_body(definition), "inputs": dict(inputs or {}),
                       "idempotency_key": idempotency_key})
    # The same key returns the same run: only then is a submit safe to send twice.
    return Call("POST", "/api/runs", _typed(t.Submitted), body, idempotent=idempotency_key is not None)


def submit_registered(
    name: str, inputs: Mapping[str, Any] | None, idempotency_key: str | None, version: int | None
) -> Call[t.Submitted]:
    body = _drop_none({"inputs": dict(inputs or {}), "idempotency_key": idempotency_key, "version": version})
    return Call("POST", f"/api/workflows/{seg(name)}/runs", _typed(t.Submitted), body,
                idempotent=idempotency_key is not None)


def validate(definition: Definition, inputs: Mapping[str, Any] | None) -> Call[t.Validation]:
    body = _drop_none({"definition": definition_body(definition),
                       "inputs": dict(inputs) if inputs is not None else None})
    return Call("POST", "/api/workflows/validate", _typed(t.Validation), body, idempotent=True)


def register(definition: Definition) -> Call[t.Registered]:
    # The same content is the same version: registering twice changes nothing.
    return Call("POST", "/api/workflows", _typed(t.Registered), {"definition": definition_body(definition)},
                idempotent=True)


def get_run(run_id: str) -> Call[t.Run]:
    return Call("GET", f"/api/runs/{seg(run_id)}", _typed(t.Run), idempotent=True)


def list_runs(
    status: str | None, name: str | None, created_after: str | None, created_before: str | None,
    limit: int | None, cursor: str | None,
) -> Call[t.RunPage]:
    params = _drop_none({"status": status, "name": name, "created_after": created_after,
                         "created_before": created_before, "limit": limit, "cursor": cursor})
    return Call("GET", "/api/runs", _typed(t.RunPage), params={k: str(v) for k, v in params.items()},
                idempotent=True)


def cancel(run_id: str, reason: str | None) -> Call[t.Cancelled]:
    # Cancelling a cancelled run cancels nothing more.
    return Call("POST", f"/api/runs/{seg(run_id)}/cancel", _typed(t.Cancelled), _drop_none({"reason": reason}),
                idempotent=True)


def cancel_step(step_id: str, reason: str | None) -> Call[t.Cancelled]:
    return Call("POST", f"/api/steps/{seg(step_id)}/cancel", _typed(t.Cancelled), _drop_none({"reason": reason}),
                idempotent=True)


def retry(step_id: str) -> Call[t.Retried]:
    return Call("POST", f"/api/steps/{seg(step_id)}/retry", _typed(t.Retried))


def rerun(run_id: str, from_step: str, inputs: Mapping[str, Any] | None, force: bool) -> Call[t.Rerun]:
    body = {"from": from_step, "inputs": dict(inputs or {}), "force": force}
    return Call("POST", f"/api/runs/{seg(run_id)}/rerun", _typed(t.Rerun), body)


def signal(run_id: str, name: str, data: Any, signal_id: str | None, reject: str | None) -> Call[t.Signalled]:
    body = _drop_none({"data": data, "id": signal_id, "reject": reject})
    # A signal with an id is delivered once: sent again, it is a `duplicate`.
    return Call("POST", f"/api/runs/{seg(run_id)}/signals/{seg(name)}", _typed(t.Signalled), body,
                idempotent=signal_id is not None)


def event(name: str, key: str, payload: Any, event_id: str | None) -> Call[t.EventSent]:
    body = _drop_none({"name": name, "key": key, "payload": payload, "id": event_id})
    return Call("POST", "/api/events", _typed(t.EventSent), body, idempotent=event_id is not None)


def list_schedules() -> Call[list[dict[str, Any]]]:
    return Call("GET", "/api/schedules", lambda body: cast(list[dict[str, Any]], body["schedules"]), idempotent=True)


def get_schedule(name: str) -> Call[dict[str, Any]]:
    return Call("GET", f"/api/schedules/{seg(name)}", _typed(dict[str, Any]), idempotent=True)


def create_schedule(name: str, workflow: str, options: Mapping[str, Any]) -> Call[dict[str, Any]]:
    body = _drop_none({"name": name, "workflow": workflow, **options})
    return Call("POST", "/api/schedules", _typed(dict[str, Any]), body)


def schedule_action(name: str, action: str) -> Call[Any]:
    """``pause``, ``resume`` (idempotent) or ``trigger`` (one run now: not idempotent)."""
    return Call("POST", f"/api/schedules/{seg(name)}/{action}", _same, idempotent=action != "trigger")


def backfill_schedule(name: str, start: str, end: str) -> Call[t.Fired]:
    return Call("POST", f"/api/schedules/{seg(name)}/backfill", _typed(t.Fired), {"from": start, "to": end})


def delete_schedule(name: str) -> Call[None]:
    return Call("DELETE", f"/api/schedules/{seg(name)}", _none, idempotent=True)


def artifact_path(artifact_id: int) -> str:
    return f"/api/artifacts/{int(artifact_id)}"
