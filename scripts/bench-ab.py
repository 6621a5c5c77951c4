#!/usr/bin/env python3
"""A/B of two rara-bench variants, alternated (BENCHMARKS.md "Method", "Pricing a change").

    scripts/bench-ab.py [-n RUNS] [--steps N] [--batch B] [--executors K] [--operation OP]
                        [--graphile] [--out DIR] A B

A and B are each a rara-bench binary, or BINARY:SQLFILE to run that binary with
`--setup-sql SQLFILE` (the SQL runs on the scratch database after its migrations, before
anything is submitted). The two run one after the other RUNS times (A, B, A, B, ...) with
`flat --json` on the server of DATABASE_URL (start the benchmark's own cluster with
`scripts/bench-postgres.sh start` and export what `scripts/bench-postgres.sh env` prints), every
report kept in DIR. Then one table: for each variant the median, minimum and maximum of steps/s,
the backends' Postgres CPU per step, WAL bytes per step and commits per step, and the median time
per call of the statements both variants ran most. `--operation sleep` prices the ordinary path
(claim, execute, outcome) instead of the quick one (`noop`). With `--graphile`, Graphile Worker
0.18 (scripts/graphile-bench.sh, as many jobs as steps) runs in every alternation too (A, B,
Graphile, ...), and each variant's steps/s is also given as its ratio to the Graphile run of the
same alternation. One run on this 2-core host varies by about
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


def report_of(command, path, what, **kwargs):
    """Runs `command`, keeps its output in `path`, and returns its JSON report."""
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    with open(path, "w") as f:
        f.write(done.stdout)
    if done.returncode != 0:
        sys.exit(f"bench-ab: {what} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return next(json.loads(line) for line in done.stdout.splitlines() if line.startswith("{"))


def run(v, args, out, index, label):
    command = [v["binary"], "--json", "flat", "--steps", str(args.steps), "--batch", str(args.batch),
               "--executors", str(args.executors), "--operation", args.operation]
    if v["sql"]:
        command += ["--setup-sql", v["sql"]]
    started = time.monotonic()
    report = report_of(command, os.path.join(out, f"{label}{index}.json"), v["spec"])
    v["reports"].append(report)
    pg = report["postgres"]
    print(f"  {label}{index}: {report['steps_per_s']:,.0f} steps/s, CPU {pg['cpu_ms_per_unit']['backends']} ms/step, "
          f"WAL {pg['wal_bytes_per_unit']:,.0f} B/step ({time.monotonic() - started:.0f} s)", flush=True)


def run_graphile(args, out, index, graphile):
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "graphile-bench.sh")
    report = report_of([script, "--json"], os.path.join(out, f"graphile{index}.json"), "graphile-bench.sh",
                       env=dict(os.environ, GRAPHILE_JOBS=str(args.steps)),
                       cwd=os.path.dirname(os.path.dirname(script)))
    graphile["reports"].append(report)
    print(f"  graphile{index}: {report['steps_per_s']:,.0f} jobs/s, CPU {report['postgres']['cpu_ms_per_unit']['backends']:.3f} "
          f"ms/job, load {report['load_average_1m']}", flush=True)


def figures(v, graphile=None):
    reports = v["reports"]
    return {
        "steps/s": [r["steps_per_s"] for r in reports],
        "CPU ms/step (backends)": [r["postgres"]["cpu_ms_per_unit"]["backends"] for r in reports
                                   if r["postgres"]["cpu_ms_per_unit"]["backends"] is not None],
        "WAL bytes/step": [r["postgres"]["wal_bytes_per_unit"] for r in reports],
        "commits/step": [r["postgres"]["commits_per_unit"] for r in reports],
        "tuples written/step": [r["postgres"]["tuples_written_per_unit"] for r in reports],
        "process CPU s per 1,000 steps": [r["cpu"]["process_per_1000_steps_s"] for r in reports if "cpu" in r],
        "÷ Graphile (same alternation)": [r["steps_per_s"] / g["steps_per_s"]
                                          for r, g in zip(reports, (graphile or {}).get("reports", []))],
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
    parser.add_argument("--operation", default="noop", help="noop (the quick path) or sleep (the ordinary path)")
    parser.add_argument("--graphile", action="store_true", help="run Graphile Worker in every alternation")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if "DATABASE_URL" not in os.environ:
        sys.exit("bench-ab: set DATABASE_URL (eval \"$(scripts/bench-postgres.sh env)\" for the own cluster)")
    a, b = variant(args.a), variant(args.b)
    out = args.out or tempfile.mkdtemp(prefix="rara-bench-ab-")
    os.makedirs(out, exist_ok=True)
    graphile = {"reports": []} if args.graphile else None
    print(f"bench-ab: {args.runs} × (A, B{', Graphile' if graphile else ''}), flat {args.steps} {args.operation} steps, "
          f"batch {args.batch}, {args.executors} executors, RARA_STEPS_PER_MESSAGE="
          f"{os.environ.get('RARA_STEPS_PER_MESSAGE', 'default')}; reports in {out}; load {os.getloadavg()[0]:.2f}",
          flush=True)
    for i in range(1, args.runs + 1):
        run(a, args, out, i, "A")
        run(b, args, out, i, "B")
        if graphile is not None:
            run_graphile(args, out, i, graphile)
    print(f"load {os.getloadavg()[0]:.2f}\n")
    print(f"A = {a['spec']}\nB = {b['spec']}\n")
    print("| figure (median, min–max) | A | B |")
    print("| --- | --- | --- |")
    fa, fb = figures(a, graphile), figures(b, graphile)
    rows = [("steps/s", 0), ("CPU ms/step (backends)", 4), ("WAL bytes/step", 0), ("commits/step", 3),
            ("tuples written/step", 2), ("process CPU s per 1,000 steps", 3)]
    if graphile is not None:
        rows.append(("÷ Graphile (same alternation)", 2))
        g = graphile["reports"]
        print(f"Graphile: {spread([r['steps_per_s'] for r in g], 0)} jobs/s, CPU "
              f"{spread([r['postgres']['cpu_ms_per_unit']['backends'] for r in g], 4)} ms/job\n")
    for name, digits in rows:
        print(f"| {name} | {spread(fa[name], digits)} | {spread(fb[name], digits)} |")
    ca, cb = per_call(a), per_call(b)
    for query in [q for q in ca if q in cb]:
        print(f"| ms per call: `{query.strip()}…` | {ca[query]:.3f} | {cb[query]:.3f} |")


if __name__ == "__main__":
    main()
