#!/usr/bin/env python3
"""The demo's closing summary, from `rara --json status <run>` on stdin: how soon the first
step started after the run was submitted, the run's artifacts (name, size, digest) and its
outputs."""
import json
import sys
from datetime import datetime


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def size(n: int | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


run = json.load(sys.stdin)
starts = [when(a["started_at"]) for s in run["steps"] for a in s["attempts"]]
if starts:
    first = (min(starts) - when(run["created_at"])).total_seconds()
    print(f"first step started {first:.2f} s after submit")
artifacts = [(s["name"], a) for s in run["steps"] for a in s["artifacts"]]
if not artifacts:
    print("no artifacts")
for step, a in artifacts:
    print(f"  {step:<10} {a['name']:<24} {size(a.get('size_bytes')):>10}  {a.get('digest') or '-'}  {a['uri']}")
outputs = run.get("outputs") or run.get("output")
if outputs:
    print("run outputs:")
    for name, value in outputs.items():
        print(f"  {name:<10} {json.dumps(value)}")
