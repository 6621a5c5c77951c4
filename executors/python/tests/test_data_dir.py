"""The example capabilities read ``path`` inputs only below the data directory."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from support import collect, request

from rara.v1 import executor_pb2_grpc as pb_grpc
from rara_worker.examples import PATH_OUTSIDE_DATA_DIR, DataDir, build_registry
from rara_worker.server import start

SECRET = "the executor's own file"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A readable file next to (not inside) the data directory."""
    path = tmp_path / "outside.csv"
    path.write_text(f"id,text\n1,{SECRET}\n")
    return path


def escapes(data_dir: Path, outside: Path) -> list[str]:
    """Every way out: a relative climb, an absolute path elsewhere, a symlink pointing out."""
    (data_dir / "sub").mkdir()
    (data_dir / "sub" / "link.csv").symlink_to(outside)
    (data_dir / "dir-link").symlink_to(outside.parent, target_is_directory=True)
    return [
        "../outside.csv",
        "sub/../../outside.csv",
        str(outside),
        "sub/link.csv",
        "dir-link/outside.csv",
        "/etc/passwd.csv",
    ]


@pytest.mark.parametrize("operation", ["text.stats", "dataset.split"])
async def test_a_path_that_leaves_the_data_dir_is_a_permanent_error_that_reads_nothing(
    stub: pb_grpc.ExecutorServiceStub, data_dir: Path, outside: Path, operation: str
) -> None:
    for path in escapes(data_dir, outside):
        body: dict[str, object] = {"path": path}
        if operation == "dataset.split":
            body["ratios"] = {"all": 1}
        events = await collect(stub, request(operation, json.dumps(body)))
        assert events[-1].HasField("failed"), (path, events[-1])
        error = events[-1].failed.error
        assert (error.code, error.retryable) == (PATH_OUTSIDE_DATA_DIR, False), path
        assert dict(error.details) == {"field": "path"}
        assert path not in error.message and SECRET not in str(events), path


async def test_a_symlink_that_stays_inside_is_followed(
    stub: pb_grpc.ExecutorServiceStub, data_dir: Path
) -> None:
    (data_dir / "real.txt").write_text("a b c\n")
    (data_dir / "alias.txt").symlink_to(data_dir / "real.txt")
    events = await collect(stub, request("text.stats", json.dumps({"path": "alias.txt"})))
    assert json.loads(events[-1].succeeded.output_json)["words"] == 3


async def test_a_missing_file_inside_is_invalid_input(
    stub: pb_grpc.ExecutorServiceStub, data_dir: Path
) -> None:
    events = await collect(stub, request("text.stats", json.dumps({"path": "nope.txt"})))
    error = events[-1].failed.error
    assert (error.code, error.retryable) == ("INVALID_INPUT", False)
    assert "FileNotFoundError" in error.message


async def test_the_server_logs_every_capability_it_serves_on_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rara_worker.server")
    running = await start(build_registry(tmp_path), artifacts_dir=tmp_path / "artifacts")
    try:
        lines = [r.getMessage() for r in caplog.records if r.name == "rara_worker.server"]
        serving = [line for line in lines if line.startswith("serving 5 capabilities")]
        assert serving, lines
        assert serving[0].endswith(": dataset.split 1.0.0, sleep 1.0.0, stats.merge 1.0.0, text.split 1.0.0, text.stats 1.0.0")
    finally:
        await running.stop(grace=0.5)


def test_a_relative_data_dir_is_fixed_when_the_registry_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    files = DataDir(Path("rel"))
    os.chdir("/")  # a later change of directory does not move the data directory
    assert files.resolve("x.txt") == tmp_path.resolve() / "rel" / "x.txt"
