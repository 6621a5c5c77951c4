"""What the API answers, as typed dictionaries (the JSON as it comes: ``docs/openapi.json``)."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict



class Progress(TypedDict):
    fraction: float
    message: str


class Artifact(TypedDict):
    id: int
    attempt: int
    name: str
    uri: str
    media_type: str | None
    size_bytes: int | None
    digest: str | None
    created_at: str


class Step(TypedDict):
    id: str
    name: str
    operation: str
    version: str | None
    status: str
    attempt: int
    max_attempts: int
    progress: Progress | None
    output: Any
    error: dict[str, Any] | None
    finished_at: str | None
    depends_on: list[str]
    attempts: list[dict[str, Any]]
    artifacts: list[Artifact]
    map_size: NotRequired[int]
    parent: NotRequired[str]
    map_index: NotRequired[int]
    waiting_for: NotRequired[str]


class Run(TypedDict):
    id: str
    name: str
    status: str
    idempotency_key: str | None
    inputs: dict[str, Any]
    created_at: str
    finished_at: str | None
    steps: list[Step]
    output: NotRequired[Any]
    output_error: NotRequired[str]
    workflow_version: NotRequired[int]
    rerun_of: NotRequired[str]
    reruns: NotRequired[list[str]]


class RunSummary(TypedDict):
    id: str
    name: str
    status: str
    steps_total: int
    steps_finished: int
    created_at: str
    finished_at: str | None


class RunPage(TypedDict):
    runs: list[RunSummary]
    next_cursor: str | None


class Submitted(TypedDict):
    id: str
    created: bool


class Problem(TypedDict):
    path: str
    field: str
    message: str


class Validation(TypedDict):
    valid: bool
    problems: list[Problem]


class Registered(TypedDict):
    name: str
    version: int
    created: bool


class Cancelled(TypedDict):
    id: str
    kind: str
    cancelled_steps: int


class Retried(TypedDict):
    step_id: str
    run_id: str
    revived_steps: int


class Rerun(TypedDict):
    id: str
    rerun_of: str
    carried: list[str]
    rerun: list[str]


class Signalled(TypedDict):
    delivery: str
    id: str
    steps: list[str]
    paused: bool


class EventSent(TypedDict):
    id: str
    fresh: bool
    completed: int


class Fired(TypedDict):
    slots: int
    created: int
    runs: list[str]


RUN_FINISHED = frozenset({"succeeded", "failed", "cancelled"})
