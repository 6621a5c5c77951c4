"""A live rara for the tests: a scratch database, ``rara ui`` (the API) and, for the tests that
run workflows, ``rara dev`` (scheduler and executor) with the Python executor, started as
``scripts/demo.sh`` starts them and stopped afterwards.

Environment (``scripts/test-clients.sh`` sets it): ``RARA_BIN`` (the ``rara`` binary),
``DATABASE_URL`` (a database on the server to make the scratch one on), ``RARA_EXECUTOR_PYTHON``
(a Python with ``rara_worker``), and LocalStack's ``AWS_*`` for ``rara dev``'s SQS.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[3]


def rara_bin() -> str:
    if os.environ.get("RARA_BIN"):
        return os.environ["RARA_BIN"]
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return str((target if target.is_absolute() else ROOT / target) / "debug" / "rara")


def eventually(
    condition: Callable[[], bool], what: str, seconds: float = 30.0, process: subprocess.Popen[bytes] | None = None
) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what}: exited with {process.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {seconds} s")
        time.sleep(0.05)


@dataclass
class Processes:
    """What a fixture started, stopped in reverse order (TERM, then KILL after 5 s)."""

    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self, args: list[str], env: dict[str, str], out: Path) -> subprocess.Popen[bytes]:
        """Runs ``args``, its stdout in ``out`` and its stderr beside it (``.log``)."""
        process = subprocess.Popen(args, env=env, stdout=out.open("wb"), stderr=out.with_suffix(".log").open("wb"),
                                   cwd=ROOT)
        self.started.append(process)
        return process

    def stop(self) -> None:
        for process in reversed(self.started):
            process.terminate()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _database(admin_url: str, name: str) -> str:
    parts = urlsplit(admin_url)
    return urlunsplit(parts._replace(path=f"/{name}"))


@contextmanager
def scratch_database() -> Iterator[str]:
    admin = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    name = f"rara_clients_{uuid.uuid4().hex[:12]}"
    subprocess.run(["psql", admin, "-qc", f"CREATE DATABASE {name}"], check=True, capture_output=True)
    try:
        yield _database(admin, name)
    finally:
        subprocess.run(["psql", admin, "-qc", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"], capture_output=True)


@dataclass
class Stack:
    url: str
    token: str
    env: dict[str, str]
    logs: Path


@contextmanager
def rara_ui(logs: Path) -> Iterator[Stack]:
    """A migrated scratch database and ``rara ui`` on a free port, with a directory artifact store."""
    logs.mkdir(parents=True, exist_ok=True)
    with scratch_database() as database:
        env = dict(os.environ, DATABASE_URL=database, RARA_LOG="warn", AWS_EC2_METADATA_DISABLED="true",
                   AWS_REGION=os.environ.get("AWS_REGION", "us-east-1"),
                   RARA_ARTIFACTS_URI=f"file://{(logs / 'artifacts').resolve()}")
        (logs / "artifacts").mkdir(exist_ok=True)
        subprocess.run([rara_bin(), "migrate"], env=env, check=True, capture_output=True)
        processes = Processes()
        try:
            token = uuid.uuid4().hex
            out = logs / "ui.out"
            ui = processes.start([rara_bin(), "--json", "ui", "--bind", "127.0.0.1:0", "--token", token], env, out)
            eventually(lambda: out.read_text().strip().startswith("{"), f"rara ui ({out})", process=ui)
            printed = json.loads(out.read_text().splitlines()[0])
            yield Stack(url=printed["url"], token=token, env=env, logs=logs)
        finally:
            processes.stop()


@contextmanager
def rara_dev(stack: Stack) -> Iterator[None]:
    """The Python executor and ``rara dev`` (scheduler and executor) on the stack's database."""
    python = os.environ.get("RARA_EXECUTOR_PYTHON", str(ROOT / ".venv-executor" / "bin" / "python"))
    processes = Processes()
    logs = stack.logs
    try:
        worker_out = logs / "python.out"
        worker = processes.start([python, "-m", "rara_worker", "--host", "127.0.0.1", "--port", "0",
                         "--data-dir", str(logs / "data"), "--no-auth"], stack.env, worker_out)
        eventually(lambda: "listening on" in worker_out.read_text(), f"the Python executor ({worker_out})",
                   process=worker)
        address = worker_out.read_text().split("listening on ", 1)[1].split()[0]
        env = dict(stack.env, RARA_REMOTE_EXECUTORS=f"http://{address}", RARA_SCHEDULER_POLL_MS="200")
        dev_out = logs / "dev.out"
        queue = f"rara-clients-{uuid.uuid4().hex[:8]}"
        dev = processes.start([rara_bin(), "dev", "--queue-name", queue], env, dev_out)
        started = lambda: "scheduler and executor running" in dev_out.read_text() + dev_out.with_suffix(".log").read_text()  # noqa: E731
        eventually(started, f"rara dev ({dev_out})", 120, process=dev)
        yield
    finally:
        processes.stop()


def main(command: list[str]) -> int:
    """``python clients/python/tests/stack.py COMMAND...``: COMMAND run against a live stack,
    with ``RARA_API_URL``, ``RARA_API_TOKEN`` and ``RARA_TEST_LIVE=1`` (the TypeScript suite)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="rara-stack-") as logs, rara_ui(Path(logs)) as stack, rara_dev(stack):
        env = dict(os.environ, RARA_API_URL=stack.url, RARA_API_TOKEN=stack.token, RARA_TEST_LIVE="1")
        return subprocess.run(command, env=env, check=False).returncode


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
