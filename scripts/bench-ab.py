#!/usr/bin/env python3
"""A/B of two rara-bench variants, alternated (BENCHMARKS.md "Method", "Pricing a change").

    scripts/bench-ab.py [-n RUNS] [--steps N] [--batch B] [--executors K] [--out DIR] A B

A and B are each a rara-bench binary, or BINARY:SQLFILE to run that binary with
`--setup-sql SQLFILE` (the SQL runs on the scratch database after its migrations, before
anything is submitted). The two run one after the other RUNS times (A, B, A, B, ...) with
`flat --json` on the server of DATABASE_URL (start the benchmark's own cluster with
`scripts/bench-postgres.sh start` and export what `scripts/bench-postgres.sh env` prints), every
report kept in DIR. Then one table: for each variant the median, minimum and maximum of steps/s,
the backends' Postgres CPU per step, WAL bytes per step and commits per step, and the median time
per call of the statements both variants ran most. One run on this 2-core host varies by about
±7 % in CPU per step, so a difference is only worth reporting when the ranges barely overlap.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def variant(spec):
    binary, _, sql = spec.partition(":")
    if not os.access(binary, os.X_OK):
        sys.exit(f"bench-ab: {binary} is not an executable rara-bench")
    if sql and not os.path.isfile(sql):
        sys.exit(f"bench-ab: {sql} does not exist")
    return {"spec": spec, "binary": binary, "sql": sql or None, "reports": []}


def run(v, args, out, index, label):
    command = [v["binary"], "--json", "flat", "--steps", str(args.steps), "--batch", str(args.batch),
               "--executors", str(args.executors)]
    if v["sql"]:
        command += ["--setup-sql", v["sql"]]
    path = os.path.join(out, f"{label}{index}.json")
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    with open(path, "w") as f:
        f.write(done.stdout)
    if done.returncode != 0:
        sys.exit(f"bench-ab: {v['spec']} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    report = next(json.loads(line) for line in done.stdout.splitlines() if line.startswith("{"))
    v["reports"].append(report)
    pg = report["postgres"]
    print(f"  {label}{index}: {report['steps_per_s']:,.0f} steps/s, CPU {pg['cpu_ms_per_unit']['backends']} ms/step, "
          f"WAL {pg['wal_bytes_per_unit']:,.0f} B/step ({time.monotonic() - started:.0f} s)", flush=True)


def figures(v):
    reports = v["reports"]
    return {
        "steps/s": [r["steps_per_s"] for r in reports],
        "CPU ms/step (backends)": [r["postgres"]["cpu_ms_per_unit"]["backends"] for r in reports
                                   if r["postgres"]["cpu_ms_per_unit"]["backends"] is not None],
        "WAL bytes/step": [r["postgres"]["wal_bytes_per_unit"] for r in reports],
        "commits/step": [r["postgres"]["commits_per_unit"] for r in reports],
    }


def per_call(v):
    """Median ms per call of each top statement (by its first 60 characters)."""
    calls = {}
    for r in v["reports"]:
        for t in r.get("top_statements", []):
            if t["calls_per_step"] > 0:
                calls.setdefault(t["query"][:60], []).append(t["exec_ms_per_step"] / t["calls_per_step"])
    return {q: statistics.median(xs) for q, xs in calls.items() if len(xs) == len(v["reports"])}


def spread(xs, digits):
    if not xs:
        return "n/a"
    f = f"{{:,.{digits}f}}"
    return f"{f.format(statistics.median(xs))} ({f.format(min(xs))}–{f.format(max(xs))})"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("-n", "--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--executors", type=int, default=2)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if "DATABASE_URL" not in os.environ:
        sys.exit("bench-ab: set DATABASE_URL (eval \"$(scripts/bench-postgres.sh env)\" for the own cluster)")
    a, b = variant(args.a), variant(args.b)
    out = args.out or tempfile.mkdtemp(prefix="rara-bench-ab-")
    os.makedirs(out, exist_ok=True)
    print(f"bench-ab: {args.runs} × (A, B), flat {args.steps} steps, batch {args.batch}, "
          f"{args.executors} executors; reports in {out}; load {os.getloadavg()[0]:.2f}", flush=True)
    for i in range(1, args.runs + 1):
        run(a, args, out, i, "A")
        run(b, args, out, i, "B")
    print(f"load {os.getloadavg()[0]:.2f}\n")
    print(f"A = {a['spec']}\nB = {b['spec']}\n")
    print("| figure (median, min–max) | A | B |")
    print("| --- | --- | --- |")
    fa, fb = figures(a), figures(b)
    for name, digits in [("steps/s", 0), ("CPU ms/step (backends)", 4), ("WAL bytes/step", 0), ("commits/step", 3)]:
        print(f"| {name} | {spread(fa[name], digits)} | {spread(fb[name], digits)} |")
    ca, cb = per_call(a), per_call(b)
    for query in [q for q in ca if q in cb]:
        print(f"| ms per call: `{query.strip()}…` | {ca[query]:.3f} | {cb[query]:.3f} |")


if __name__ == "__main__":
    main()
