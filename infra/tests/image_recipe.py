"""Run the build stage of executors/python/Dockerfile without a Docker engine.

There is no engine here, so this plays the Dockerfile's build stage on the host, step by
step: the build context is what .dockerignore lets through (copied into a scratch root),
ENV sets variables, COPY copies from that context, RUN runs in a shell, and every absolute
path of a step (/opt/rara, /build, ...) is moved under the scratch root. What it cannot
check is the base image: the host's python3 stands in for the image's (the minor versions
are compared). The final stage's venv (`COPY --from=build`) is the build stage's, so the
result is the interpreter the image's ENTRYPOINT runs; test_executor_image.py then starts
the server from it when RARA_EXECUTOR_PYTHON names it (scripts/check-template.sh does).

    python infra/tests/image_recipe.py ROOT   # prints ROOT/opt/rara/bin/python

Rebuilt only when the Dockerfile, .dockerignore or a context file changed (ROOT/.stamp).

Needs the network (or pip's cache) for the pinned packages, like a real build.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import test_executor_image as ti

ABSOLUTE = re.compile(r"(?<![\w./$-])/(?=[A-Za-z])")


def context_files(source: Path) -> list[str]:
    """The files of the build context, relative to it, after .dockerignore."""
    ignore = [p.strip() for p in (source / ".dockerignore").read_text().splitlines() if p.strip() and not p.lstrip().startswith("#")]
    return sorted(
        p.relative_to(source).as_posix()
        for p in source.rglob("*")
        if p.is_file() and not ti.dockerignore_excludes(ignore, p.relative_to(source).as_posix())
    )


def digest(source: Path) -> str:
    """What the build depends on: the Dockerfile, .dockerignore and the context's files."""
    h = hashlib.sha256()
    for rel in ["Dockerfile", ".dockerignore", *context_files(source)]:
        h.update(rel.encode() + b"\0" + (source / rel).read_bytes() + b"\0")
    return h.hexdigest()


def build(root: Path, source: Path = ti.PYTHON_DIR) -> Path:
    """Play the build stage into `root` (again only when its inputs changed); the path of
    the image's python."""
    python = root / "opt" / "rara" / "bin" / "python"
    stamp = root / ".stamp"
    want = digest(source)
    if python.exists() and stamp.exists() and stamp.read_text() == want:
        print(f"image-recipe: {root} is up to date", file=sys.stderr)
        return python
    if root.exists():
        shutil.rmtree(root)
    context = root / ".context"
    for rel in context_files(source):
        (context / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / rel, context / rel)
    steps = ti.instructions((source / "Dockerfile").read_text())
    base = next(rest for stage, word, rest in steps if word == "ARG" and rest.startswith("PYTHON_IMAGE="))
    image = re.search(r"python:(\d+\.\d+)", base)
    host = f"{sys.version_info.major}.{sys.version_info.minor}"
    if image and image.group(1) != host:
        raise SystemExit(f"the image's base is python {image.group(1)}, this host runs {host}")
    env = {**os.environ}
    bin_dir = root / ".host-bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(sys.executable)  # the base image's `python`
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    for stage, word, rest in steps:
        if stage != 1:
            continue  # the final stage only copies the build stage's venv and sets metadata
        moved = ABSOLUTE.sub(str(root) + "/", rest)
        if word == "ENV":
            for key, value in (item.split("=", 1) for item in shlex.split(moved)):
                env[key] = value
        elif word == "COPY":
            *sources, dest = shlex.split(moved)
            for src in sources:
                origin = context / src
                target = Path(dest) / (origin.name if dest.endswith("/") or len(sources) > 1 else "")
                target.parent.mkdir(parents=True, exist_ok=True)
                if origin.is_dir():
                    shutil.copytree(origin, target, dirs_exist_ok=True)
                else:
                    shutil.copy2(origin, target)
        elif word == "RUN":
            print(f"RUN {moved}", file=sys.stderr)
            subprocess.run(["sh", "-c", moved], check=True, env=env, cwd=root)
    if not python.exists():
        raise SystemExit(f"the build stage made no {python}")
    stamp.write_text(want)
    return python


if __name__ == "__main__":
    print(build(Path(sys.argv[1]).resolve()))
