"""Rebuild a word index from code: define the workflow in Python, submit it, watch it with a
progress line per step change, print the run's outputs.

    pip install ./clients/python
    eval "$(scripts/dev.sh env)"                        # with `make dev` running elsewhere
    rara ui &                                           # prints the API URL and token
    RARA_API_URL=http://127.0.0.1:7878 RARA_API_TOKEN=... python examples/python/rebuild_index.py

The same workflow as YAML is examples/rebuild-index.yaml (a test checks they are identical).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from rara_client import Client, Input, RunFinished, StepChange, Workflow, item

TEXT = """rara runs workflow steps on AWS Lambda, safely, cheaply and fast.

A scheduler leases due steps in Postgres and enqueues them on SQS; an executor claims each step.

Postgres is the source of truth; SQS only delivers."""


def build() -> Workflow:
    """Split the text into paragraphs, count each one's words (a map, two at a time), merge
    the counts into the index, then publish it."""
    wf = Workflow("rebuild-index", inputs={"text": Input(str), "top": Input(int, default=5)})
    split = wf.step("split", "text.split", input={"text": wf.input("/text"), "by": "paragraph"})
    stats = wf.step("stats", "text.stats", version="1.0.0", for_each=split.output("/parts"),
                    max_concurrency=2, input={"text": item("/text"), "top": 3})
    merge = wf.step("merge", "stats.merge", input={"stats": stats.output(), "top": wf.input("/top")})
    wf.step("publish", "sleep", input={"seconds": 1}, depends_on=[merge])
    wf.output = {"paragraphs": merge.output("/parts"), "words": merge.output("/words"),
                 "top_words": merge.output("/top_words")}
    return wf


def progress(change: StepChange, started: float) -> str:
    step = change.step
    line = f"{time.monotonic() - started:6.1f}s  {step['name']:<12} {step['status']}"
    line += f" (attempt {step['attempt']}/{step['max_attempts']}) {change.fraction:4.0%}"
    reported = step["progress"]
    if reported and reported["message"]:
        line += f" {reported['message']}"
    return line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="the API (default: $RARA_API_URL)")
    parser.add_argument("--text", default=TEXT, help="the text to index")
    parser.add_argument("--top", type=int, default=5)
    args = parser.parse_args()
    with Client(args.url) as rara:
        submitted = rara.submit(build(), {"text": args.text, "top": args.top})
        print(f"run {submitted['id']}", flush=True)
        started = time.monotonic()
        for change in rara.watch(submitted["id"]):
            if isinstance(change, StepChange):
                print(progress(change, started), flush=True)
            elif isinstance(change, RunFinished):
                print(f"run {change.run['id']}  {change.run['name']}  {change.status}")
                print(json.dumps(change.output, indent=2))
                return 0 if change.status == "succeeded" else 1
    return 1


if __name__ == "__main__":
    sys.exit(main())
