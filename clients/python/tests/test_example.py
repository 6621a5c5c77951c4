"""examples/python/rebuild_index.py, run as a user runs it, against a live ``rara ui`` with
``rara dev`` executing: it submits, prints progress lines and the run's outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from .stack import ROOT, Stack


def test_the_rebuild_index_example_runs_end_to_end(executing: Stack) -> None:
    env = dict(os.environ, RARA_API_URL=executing.url, RARA_API_TOKEN=executing.token)
    done = subprocess.run([sys.executable, str(ROOT / "examples/python/rebuild_index.py"), "--top", "3"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("run ")
    progress = [line for line in lines if "s  " in line and "(attempt" in line]
    assert any("stats[0]" in line for line in progress), done.stdout
    assert any("publish" in line and "succeeded" in line for line in progress), done.stdout
    end = next(i for i, line in enumerate(lines) if line.endswith("succeeded") and "rebuild-index" in line)
    output = json.loads("\n".join(lines[end + 1:]))
    assert output["paragraphs"] == 3
    assert len(output["top_words"]) == 3
    assert output["words"] > 20
