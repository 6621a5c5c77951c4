"""The client's operations against a live ``rara ui``: paging, cancel, retry, rerun, events,
schedules; and, with ``rara dev`` executing, watching a run to its end (sync and async) and
downloading an artifact."""

from __future__ import annotations

import hashlib
from pathlib import Path

from rara_client import AsyncClient, Client, RunFinished, StepChange

from .proxy import proxy_to
from .stack import Stack


def noop(name: str) -> dict[str, object]:
    return {"name": name, "steps": [{"name": "a", "operation": "noop"}, {"name": "b", "operation": "noop",
                                                                         "depends_on": ["a"]}]}


def test_runs_are_listed_with_filters_and_pages(client: Client) -> None:
    made = {client.submit(noop("paged"))["id"] for _ in range(5)}
    first = client.list_runs(name="paged", limit=2)
    assert len(first["runs"]) == 2 and first["next_cursor"]
    second = client.list_runs(name="paged", limit=2, cursor=first["next_cursor"])
    assert not {r["id"] for r in first["runs"]} & {r["id"] for r in second["runs"]}
    assert {r["id"] for r in client.iter_runs(name="paged", limit=2)} == made
    assert client.list_runs(name="paged", status="succeeded")["runs"] == []


def test_cancel_a_run_then_retry_a_step(client: Client) -> None:
    run = client.submit(noop("cancelled"))
    cancelled = client.cancel(run["id"], "testing")
    assert (cancelled["kind"], cancelled["cancelled_steps"]) == ("run", 2)
    assert client.get_run(run["id"])["status"] == "cancelled"
    step = client.get_run(run["id"])["steps"][0]
    retried = client.retry(step["id"])
    assert retried["run_id"] == run["id"] and retried["revived_steps"] >= 1
    assert client.get_run(run["id"])["status"] == "running"


def test_an_event_and_a_registered_run(client: Client) -> None:
    sent = client.event("dataset.uploaded", "ds-1", {"rows": 3}, event_id="e-1")
    assert sent["fresh"] and sent["id"] == "e-1"
    assert not client.event("dataset.uploaded", "ds-1", {"rows": 3}, event_id="e-1")["fresh"]
    registered = client.register(noop("registered"))
    assert registered["version"] == 1
    run = client.submit_workflow("registered", idempotency_key="once")
    assert client.submit_workflow("registered", idempotency_key="once")["id"] == run["id"]
    assert client.get_run(run["id"])["workflow_version"] == 1


def test_schedules_are_created_paused_resumed_triggered_deleted(client: Client) -> None:
    client.register(noop("scheduled"))
    created = client.create_schedule("hourly", "scheduled", every_seconds=3600, overlap="allow")
    assert created["name"] == "hourly"
    assert "hourly" in [s["name"] for s in client.list_schedules()]
    client.pause_schedule("hourly")
    assert client.get_schedule("hourly")["paused"] is True
    client.resume_schedule("hourly")
    assert client.get_schedule("hourly")["paused"] is False
    fired = client.trigger_schedule("hourly")
    assert fired["created"] == 1 and len(fired["runs"]) == 1
    client.delete_schedule("hourly")
    assert "hourly" not in [s["name"] for s in client.list_schedules()]


def test_a_run_is_watched_to_its_end_and_its_artifact_downloaded(executing: Stack, tmp_path: Path) -> None:
    definition = {"name": "watched", "steps": [
        {"name": "count", "operation": "text.stats", "version": "1.0.0", "input": {"text": "a b b", "top": 2}},
        {"name": "nap", "operation": "sleep", "input": {"seconds": 1}, "depends_on": ["count"]}]}
    with Client(executing.url, token=executing.token) as rara:
        run = rara.submit(definition)
        seen = list(rara.watch(run["id"]))
        assert isinstance(seen[-1], RunFinished) and seen[-1].status == "succeeded"
        assert all(isinstance(c, StepChange) for c in seen[:-1])
        statuses = [(c.name, c.status) for c in seen if isinstance(c, StepChange)]
        assert ("count", "succeeded") in statuses and ("nap", "succeeded") in statuses
        assert statuses.index(("count", "succeeded")) < statuses.index(("nap", "succeeded"))
        assert len(statuses) > 2, f"changes along the way, not only the end: {statuses}"
        finished = seen[-1].run
        artifact = finished["steps"][0]["artifacts"][0]
        path = rara.download_artifact(artifact, tmp_path / artifact["name"])
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        assert artifact["digest"] == f"sha256:{digest}"
        assert path.stat().st_size == artifact["size_bytes"]


async def test_the_async_client_watches_too(executing: Stack) -> None:
    async with AsyncClient(executing.url, token=executing.token) as rara:
        run = await rara.submit({"name": "async", "steps": [{"name": "nap", "operation": "sleep",
                                                              "input": {"seconds": 1}}]})
        changes = [c async for c in rara.watch(run["id"])]
        assert isinstance(changes[-1], RunFinished) and changes[-1].status == "succeeded"
        assert (await rara.wait(run["id"]))["status"] == "succeeded"


def test_a_watch_whose_stream_breaks_reconnects_and_misses_nothing(executing: Stack) -> None:
    definition = {"name": "cut", "steps": [
        {"name": "first", "operation": "sleep", "input": {"seconds": 2}},
        {"name": "second", "operation": "noop", "depends_on": ["first"]}]}
    with proxy_to(executing.url) as proxy:
        # The proxy's Host is another port: the server answers to its own address only.
        with Client(proxy.url, token=executing.token, headers={"host": executing.url.removeprefix("http://")}) as rara:
            run = rara.submit(definition)
            seen: list[str] = []
            cuts = 0
            for change in rara.watch(run["id"], poll_interval=0.2):
                if isinstance(change, StepChange):
                    seen.append(f"{change.name}:{change.status}")
                    if change.name == "first" and change.status == "running" and not cuts:
                        cuts = proxy.cut()
                else:
                    assert change.status == "succeeded"
    assert cuts > 0, "the stream was cut while the run went on"
    assert proxy.accepted > 2, "the watch connected again"
    assert "first:succeeded" in seen and "second:succeeded" in seen, seen
