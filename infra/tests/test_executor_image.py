"""The executor service's image (executors/python/Dockerfile) without a Docker engine.

No engine runs here, so the Dockerfile is read, not built: its ENTRYPOINT must be the
package's real console script, its pins the ones the Python tests run with, its user not
root, its port the one the stack routes to, and what it COPYs must survive .dockerignore.
Then the real server is started exactly as the task definition starts it (the entry point
with the task's Command) and probed on the target group's health check path, the way the
load balancer will: gRPC status 0 and SERVING, then SIGTERM ends it within StopTimeout.
scripts/check-template.sh runs it from the venv image_recipe.py builds by playing the
Dockerfile's build stage (RARA_EXECUTOR_PYTHON); without it, from .venv-executor.
The checks return problems, and the mutation tests prove each one can fail.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

import executor_service_checks as es
import template_checks as tc

PYTHON_DIR = tc.ROOT / "executors" / "python"
PYTHON_ENV = tc.ROOT / "scripts" / "python-env.sh"


def instructions(dockerfile: str) -> list[tuple[int, str, str]]:
    """(stage, INSTRUCTION, arguments) with continuation lines joined and comments dropped;
    stage counts FROM lines (0 before the first)."""
    out, stage, pending = [], 0, ""
    for line in dockerfile.splitlines():
        if not pending and line.lstrip().startswith("#"):
            continue
        pending += line.rstrip("\\").strip() + " " if line.rstrip().endswith("\\") else line.strip()
        if line.rstrip().endswith("\\") or not pending.strip():
            continue
        word, _, rest = pending.strip().partition(" ")
        pending = ""
        if word.upper() == "FROM":
            stage += 1
        out.append((stage, word.upper(), rest.strip()))
    return out


def python_env_pins(text: str) -> dict[str, str]:
    block = re.search(r"PINS=\((.*?)\)", text, re.S)
    assert block, "no PINS=( ... ) in scripts/python-env.sh"
    return dict(re.findall(r"^\s*([A-Za-z0-9_.-]+)==(\S+)", block.group(1), re.M))


def dockerignore_excludes(patterns: list[str], path: str) -> bool:
    """Docker's rule: the last pattern that matches the path (or a parent of it) decides."""
    excluded = False
    parts = path.strip("/").split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for raw in patterns:
        neg = raw.startswith("!")
        pat = raw[1:].strip("/") if neg else raw.strip("/")
        pat = pat[3:] if pat.startswith("**/") else pat
        if any(fnmatch.fnmatchcase(p, pat) or fnmatch.fnmatchcase(p.split("/")[-1], pat) and raw.startswith(("**/", "!**/")) for p in prefixes):
            excluded = not neg
    return excluded


def check_dockerfile(dockerfile: str, dockerignore: str, pyproject: dict, pins: dict[str, str]) -> list[str]:
    problems = []
    steps = instructions(dockerfile)
    final = max(s for s, _, _ in steps)
    last = {word: rest for s, word, rest in steps if s == final}
    scripts = pyproject["project"].get("scripts", {})
    try:
        entrypoint = json.loads(last.get("ENTRYPOINT", "null"))
    except json.JSONDecodeError:
        entrypoint = None
    if not (isinstance(entrypoint, list) and entrypoint and entrypoint[0] in scripts):
        problems.append(f"ENTRYPOINT {last.get('ENTRYPOINT')!r} is not an exec-form console script of {sorted(scripts)}")
    elif scripts[entrypoint[0]] != "rara_worker.__main__:main":
        problems.append(f"ENTRYPOINT {entrypoint[0]} runs {scripts[entrypoint[0]]}, not rara_worker.__main__:main")
    user = last.get("USER", "root").split(":")[0]
    if user in ("root", "0"):
        problems.append("the final stage runs as root (no USER)")
    if last.get("EXPOSE", "").split("/")[0] != str(es.CONTAINER_PORT):
        problems.append(f"EXPOSE {last.get('EXPOSE')!r}, the stack routes to {es.CONTAINER_PORT}")
    installed = dict(re.findall(r"\b([A-Za-z0-9_.-]+)==([0-9][^\s\\]*)", " ".join(r for _, w, r in steps if w == "RUN")))
    for dep in pyproject["project"]["dependencies"]:
        name = re.split(r"[<>=!~ ;\[]", dep, maxsplit=1)[0]
        if name not in installed:
            problems.append(f"dependency {name} is not pinned in the Dockerfile")
        elif pins.get(name) != installed[name]:
            problems.append(f"{name}=={installed[name]} in the Dockerfile, {pins.get(name)} in scripts/python-env.sh")
    ignore = [p.strip() for p in dockerignore.splitlines() if p.strip() and not p.lstrip().startswith("#")]
    for _, word, rest in steps:
        if word == "COPY" and not rest.startswith("--from"):
            for src in rest.split()[:-1]:
                if dockerignore_excludes(ignore, src):
                    problems.append(f"COPY {src}: excluded from the build context by .dockerignore")
    for junk in (".venv/bin/python", "tests/test_execute.py", "src/rara_worker/__pycache__/x.pyc"):
        if not dockerignore_excludes(ignore, junk):
            problems.append(f".dockerignore lets {junk} into the build context")
    return problems


@pytest.fixture(scope="module")
def sources() -> dict:
    with open(PYTHON_DIR / "pyproject.toml", "rb") as f:
        pyproject = tomllib.load(f)
    return {
        "dockerfile": (PYTHON_DIR / "Dockerfile").read_text(),
        "dockerignore": (PYTHON_DIR / ".dockerignore").read_text(),
        "pyproject": pyproject,
        "pins": python_env_pins(PYTHON_ENV.read_text()),
    }


def test_the_dockerfile_matches_the_package_and_the_stack(sources):
    assert check_dockerfile(**sources) == []


DOCKERFILE_MUTATIONS = {
    "entry point misspelt": (
        lambda d: d.replace('ENTRYPOINT ["rara-worker"]', 'ENTRYPOINT ["rara-executor"]'),
        "ENTRYPOINT '[\"rara-executor\"]' is not an exec-form console script",
    ),
    "shell-form entry point": (
        lambda d: d.replace('ENTRYPOINT ["rara-worker"]', "ENTRYPOINT rara-worker"),
        "is not an exec-form console script",
    ),
    "running as root": (lambda d: d.replace("USER 10001\n", ""), "the final stage runs as root"),
    "another port": (lambda d: d.replace("EXPOSE 50051", "EXPOSE 8080"), "EXPOSE '8080'"),
    "a pin drifted": (lambda d: d.replace("grpcio==1.85.3", "grpcio==1.80.0"), "grpcio==1.80.0 in the Dockerfile, 1.85.3 in"),
    "a dependency unpinned": (lambda d: d.replace("semver==3.1.1", "semver"), "dependency semver is not pinned"),
}


@pytest.mark.parametrize("name", list(DOCKERFILE_MUTATIONS))
def test_a_broken_dockerfile_is_reported(sources, name):
    mutate, expected = DOCKERFILE_MUTATIONS[name]
    broken = {**sources, "dockerfile": mutate(sources["dockerfile"])}
    assert broken["dockerfile"] != sources["dockerfile"], f"{name}: the mutation changed nothing"
    problems = check_dockerfile(**broken)
    assert any(expected in p for p in problems), f"{name}: expected {expected!r} in {problems}"


def test_a_broken_dockerignore_is_reported(sources):
    drops_src = sources["dockerignore"].replace("!src/\n", "")
    assert any("COPY src: excluded" in p for p in check_dockerfile(**{**sources, "dockerignore": drops_src}))
    lets_all_in = "\n".join(line for line in sources["dockerignore"].splitlines() if line != "*")
    assert any(".dockerignore lets tests/test_execute.py" in p for p in check_dockerfile(**{**sources, "dockerignore": lets_all_in}))


def test_a_renamed_console_script_is_reported(sources):
    pyproject = json.loads(json.dumps(sources["pyproject"]))
    pyproject["project"]["scripts"] = {"rara-worker": "rara_worker.server:serve"}
    assert any("runs rara_worker.server:serve" in p for p in check_dockerfile(**{**sources, "pyproject": pyproject}))


# ------------------------------------------------------------------ the real server


def executor_venv() -> Path:
    python = Path(os.environ.get("RARA_EXECUTOR_PYTHON", tc.ROOT / ".venv-executor" / "bin" / "python"))
    if not python.exists():
        pytest.fail(f"{python} is missing: run scripts/python-env.sh (scripts/check-template.sh does)")
    return python.parent


PROBE = """
import json, sys, grpc
from grpc_health.v1 import health_pb2
address, path = sys.argv[1], sys.argv[2]
with grpc.insecure_channel(address) as channel:
    check = channel.unary_unary(path, request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                                response_deserializer=health_pb2.HealthCheckResponse.FromString)
    try:
        reply = check(health_pb2.HealthCheckRequest(), timeout=5)
        print(json.dumps({"code": 0, "status": health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}))
    except grpc.RpcError as e:
        print(json.dumps({"code": e.code().value[0], "status": None}))
"""


def probe(venv: Path, address: str, path: str) -> dict:
    """What the load balancer's health check sees: an empty request to `path`."""
    out = subprocess.run([venv / "python", "-c", PROBE, address, path], capture_output=True, text=True, timeout=30, check=True)
    return json.loads(out.stdout)


def test_the_task_command_starts_the_server_the_health_check_accepts(sources, tmp_path):
    template = es.load_template()
    r = tc.resolve(template, {**es.REQUIRED_PARAMS, "ImageTag": "v1"})
    container = es._container(r)
    command = [str(a) for a in container["Command"]]
    entrypoint = json.loads(dict((w, a) for _, w, a in instructions(sources["dockerfile"]))["ENTRYPOINT"])
    venv = executor_venv()
    # Exactly the container's argv, then a free loopback port (argparse: the last one wins).
    argv = [str(venv / entrypoint[0]), *entrypoint[1:], *command, "--host", "127.0.0.1", "--port", "0"]
    env = {**os.environ, "TMPDIR": str(tmp_path), "RARA_EXECUTOR_TOKENS": "rara-image-test-token-0001"}  # as the agent injects it
    server = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = server.stdout.readline().strip()  # first line: "listening on HOST:PORT"
        assert line.startswith("listening on "), f"{argv}: {line!r} {server.stderr.read() if server.poll() is not None else ''}"
        address = line.removeprefix("listening on ")
        tg = r.props(es.TG)
        seen = probe(venv, address, tg["HealthCheckPath"])
        assert seen == {"code": int(tg["Matcher"]["GrpcCode"]), "status": "SERVING"}
        # The load balancer's default gRPC health path is not served: the path must be set.
        assert probe(venv, address, "/AWS.ALB/healthcheck")["code"] == 12  # UNIMPLEMENTED
        started = time.monotonic()
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=int(container["StopTimeout"])) == 0
        print(f"stopped {time.monotonic() - started:.2f} s after SIGTERM (StopTimeout {container['StopTimeout']} s)", file=sys.stderr)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
