"""Workflows in code: the JSON definition is exactly the YAML file's, dependencies come from the
references, and a wrong reference fails the server's validation, at its field path, before
anything is submitted."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
import yaml

from rara_client import Client, Input, InvalidWorkflowError, Workflow, item

from .stack import ROOT


def example(name: str) -> Any:
    return yaml.safe_load((ROOT / "examples" / name).read_text())


def rebuild_index_module() -> Any:
    spec = importlib.util.spec_from_file_location("rebuild_index", ROOT / "examples/python/rebuild_index.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def data_flow() -> Workflow:
    """examples/data-flow.yaml, in code."""
    wf = Workflow("data-flow", inputs={
        "date": Input(str, default="2026-12-01", description="the report's date"),
        "top": Input(int, default=5),
        "text": Input(str, default="rara leases steps in Postgres and delivers them over SQS.\n"
                                   "Postgres is the source of truth."),
    })
    stats = wf.step("stats", "text.stats", version="1.0.0", input={"text": wf.input("/text"), "top": wf.input("/top")})
    wf.step("report", "noop", input={
        "date": wf.input("/date"),
        "words": stats.output("/words"),
        "top_word": stats.output("/top_words/0/word"),
        "stats_file": stats.artifact("stats.json"),
        "everything": stats.output(),
    })
    wf.output = {"top_word": stats.output("/top_words/0/word"), "stats_file": stats.artifact("stats.json")}
    return wf


def test_a_definition_built_in_code_is_the_yaml_example() -> None:
    assert data_flow().to_dict() == example("data-flow.yaml")
    assert rebuild_index_module().build().to_dict() == example("rebuild-index.yaml")


def test_a_difference_from_the_yaml_shows() -> None:
    changed = data_flow()
    changed.inputs["top"] = Input(int, default=6)
    assert changed.to_dict() != example("data-flow.yaml")


def test_dependencies_come_from_references_after_the_explicit_ones() -> None:
    wf = Workflow("deps")
    a = wf.step("a", "noop")
    b = wf.step("b", "noop")
    wf.step("c", "noop", depends_on=["b"], input={"x": [a.output("/x"), {"y": b.artifact("f")}], "z": a.output()})
    wf.step("d", "noop", for_each=a.output("/list"), input={"v": item()})
    steps = wf.to_dict()["steps"]
    assert steps[0] == {"name": "a", "operation": "noop"}
    assert steps[2]["depends_on"] == ["b", "a"]
    assert steps[2]["input"] == {"x": [{"$output": "a", "pointer": "/x"}, {"y": {"$artifact": "b", "name": "f"}}],
                                 "z": {"$output": "a"}}
    assert steps[3] == {"name": "d", "operation": "noop", "for_each": {"$output": "a", "pointer": "/list"},
                        "input": {"v": {"$item": ""}}, "depends_on": ["a"]}


def test_a_value_that_is_not_json_is_refused() -> None:
    wf = Workflow("bad")
    a = wf.step("a", "noop")
    wf.step("b", "noop", input={"when": object()})
    with pytest.raises(TypeError, match="not a JSON value"):
        wf.to_dict()
    wf = Workflow("bad")
    wf.step("b", "noop", input={"step": a})
    with pytest.raises(TypeError, match="output"):
        wf.to_dict()
    with pytest.raises(TypeError):
        Input(bytes)


def test_a_wrong_reference_fails_validation_with_its_field_before_submit(client: Client) -> None:
    wf = Workflow("wrong-reference", inputs={"text": Input(str)})
    wf.step("split", "text.split", input={"text": wf.input("/txt")})
    before = len(client.list_runs(limit=500)["runs"])
    with pytest.raises(InvalidWorkflowError) as refused:
        client.submit(wf, {"text": "a"})
    assert refused.value.field == "definition.steps[0].input.text"
    assert refused.value.exit_code == 4
    assert refused.value.problems[0]["path"] == "steps[0].input.text"
    assert len(client.list_runs(limit=500)["runs"]) == before, "nothing was submitted"


def test_an_item_outside_a_map_and_a_step_of_another_workflow_are_problems(client: Client) -> None:
    other = Workflow("other").step("elsewhere", "noop")
    wf = Workflow("strays")
    wf.step("a", "noop", input={"x": item("/x")})
    wf.step("b", "noop", input={"y": other.output("/y")})
    validation = client.validate(wf)
    assert not validation["valid"]
    paths = [p["path"] for p in validation["problems"]]
    assert "steps[0].input.x" in paths and "steps[1].depends_on[0]" in paths, validation


def test_a_valid_workflow_in_code_validates_and_runs_submitted(client: Client) -> None:
    module = rebuild_index_module()
    wf = module.build()
    assert client.validate(wf, {"text": "a"}) == {"valid": True, "problems": []}
    missing = client.validate(wf, {})
    assert missing["problems"][0]["path"] == "inputs.text"
    submitted = client.submit(wf, {"text": "one\n\ntwo"}, idempotency_key="rebuild-1")
    again = client.submit(wf, {"text": "one\n\ntwo"}, idempotency_key="rebuild-1")
    assert submitted["created"] and not again["created"] and again["id"] == submitted["id"]
    run = client.get_run(submitted["id"])
    assert [s["name"] for s in run["steps"]] == ["split", "stats", "merge", "publish"]


def test_a_definition_file_or_text_is_read(client: Client, tmp_path: Path) -> None:
    path = data_flow().save(tmp_path / "data-flow.json")
    assert client.validate(path)["valid"]
    assert client.validate(str(ROOT / "examples" / "data-flow.yaml"))["valid"]
    assert not client.validate("name: x\nsteps: []\n")["valid"]
