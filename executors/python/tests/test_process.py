"""`python -m rara_worker` as a process: port 0, health, graceful SIGTERM."""

from __future__ import annotations

import asyncio
import re
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from support import collect, request

from rara.v1 import executor_pb2_grpc as pb_grpc


class Worker:
    def __init__(self, proc: asyncio.subprocess.Process, address: str) -> None:
        self.proc = proc
        self.address = address


async def spawn(
    tmp_path: Path, *extra: str, env: dict[str, str] | None = None, auth: bool = False
) -> Worker:
    """``python -m rara_worker`` on port 0; ``--no-auth`` unless ``auth`` (tokens come from ``env``)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rara_worker", "--port", "0",
        "--artifacts-dir", str(tmp_path / "artifacts"), *extra, *(() if auth else ("--no-auth",)),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), timeout=20)).decode()
    match = re.fullmatch(r"listening on (127\.0\.0\.1:\d+)\n", line)
    assert match, line
    return Worker(proc, match.group(1))


async def stderr_until(w: Worker, fragment: str) -> list[str]:
    """The worker's log lines up to the first that holds ``fragment``."""
    assert w.proc.stderr is not None
    lines: list[str] = []
    while not lines or fragment not in lines[-1]:
        line = await asyncio.wait_for(w.proc.stderr.readline(), timeout=10)
        assert line, lines
        lines.append(line.decode())
    return lines


async def stop(w: Worker) -> None:
    w.proc.send_signal(signal.SIGTERM)
    await asyncio.wait_for(w.proc.communicate(), timeout=10)


@pytest.fixture
async def worker(tmp_path: Path) -> AsyncIterator[Worker]:
    w = await spawn(tmp_path, "--grace", "5")
    yield w
    if w.proc.returncode is None:
        w.proc.kill()
        await w.proc.wait()


async def test_health_answers_serving_for_the_server_and_the_service(worker: Worker) -> None:
    async with grpc.aio.insecure_channel(worker.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "rara.v1.ExecutorService"):
            response = await health.Check(health_pb2.HealthCheckRequest(service=service))
            assert response.status == health_pb2.HealthCheckResponse.SERVING


async def test_sigterm_lets_running_work_finish_then_exits_zero(worker: Worker) -> None:
    async with grpc.aio.insecure_channel(worker.address) as channel:
        stub = pb_grpc.ExecutorServiceStub(channel)
        running = asyncio.create_task(collect(stub, request("sleep", '{"seconds": 0.5}')))
        await asyncio.sleep(0.2)
        worker.proc.send_signal(signal.SIGTERM)
        events = await running
    assert events[-1].HasField("succeeded")
    assert await asyncio.wait_for(worker.proc.wait(), timeout=10) == 0


async def test_work_past_the_grace_period_fails_retryable_on_shutdown(tmp_path: Path) -> None:
    w = await spawn(tmp_path, "--grace", "0.2")
    async with grpc.aio.insecure_channel(w.address) as channel:
        stub = pb_grpc.ExecutorServiceStub(channel)
        running = asyncio.create_task(collect(stub, request("sleep", '{"seconds": 30}')))
        await asyncio.sleep(0.3)
        w.proc.send_signal(signal.SIGTERM)
        events = await asyncio.wait_for(running, timeout=10)
    error = events[-1].failed.error
    assert (error.code, error.retryable) == ("SHUTTING_DOWN", True)
    assert await asyncio.wait_for(w.proc.wait(), timeout=10) == 0


async def test_start_logs_the_data_dir_and_the_capabilities_with_versions(tmp_path: Path) -> None:
    data = tmp_path / "data"
    w = await spawn(tmp_path, "--data-dir", str(data))
    lines = await stderr_until(w, "serving 5 capabilities")
    await stop(w)
    assert any(f"path inputs only below {data}" in line for line in lines), lines
    assert lines[-1].rstrip().endswith(": dataset.split 1.0.0, sleep 1.0.0, stats.merge 1.0.0, text.split 1.0.0, text.stats 1.0.0")
    assert data.is_dir()


async def test_the_data_dir_comes_from_the_environment_else_a_fresh_temporary_one(
    tmp_path: Path,
) -> None:
    from_env = tmp_path / "from-env"
    from_env.mkdir()
    (from_env / "in.txt").write_text("one two\n")
    w = await spawn(tmp_path, env={"RARA_WORKER_DATA_DIR": str(from_env)})
    async with grpc.aio.insecure_channel(w.address) as channel:
        stub = pb_grpc.ExecutorServiceStub(channel)
        events = await collect(stub, request("text.stats", '{"path": "in.txt"}'))
    await stop(w)
    assert events[-1].HasField("succeeded"), events[-1]

    w = await spawn(tmp_path, env={"RARA_WORKER_DATA_DIR": "", "TMPDIR": str(tmp_path)})
    lines = await stderr_until(w, "path inputs only below")
    await stop(w)
    assert str(tmp_path / "rara-data") in lines[-1], lines


async def test_retention_and_the_event_bound_come_from_the_command_line(tmp_path: Path) -> None:
    w = await spawn(tmp_path, "--retention", "0.5", "--max-kept-events", "7")
    lines = await stderr_until(w, "serving 5 capabilities")
    await stop(w)
    assert any("retained 0.5s, at most 7 events kept while detached" in line for line in lines), lines


async def test_a_bound_below_one_event_is_refused_at_start(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rara_worker", "--port", "0", "--max-kept-events", "0",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), timeout=20)
    assert proc.returncode == 2
    assert b"max kept events must be at least 1" in err


@pytest.mark.parametrize(
    ("extra", "env"), [(("--conformance",), {}), ((), {"RARA_WORKER_CONFORMANCE": "1"})]
)
async def test_the_conformance_capabilities_are_served_on_request(
    tmp_path: Path, extra: tuple[str, ...], env: dict[str, str]
) -> None:
    w = await spawn(tmp_path, *extra, env=env)
    lines = await stderr_until(w, "serving 9 capabilities")
    await stop(w)
    served = lines[-1].rstrip()
    for name in ("echo", "sleep", "fail", "chatty"):
        assert f"conformance.{name} 1.0.0" in served, served
