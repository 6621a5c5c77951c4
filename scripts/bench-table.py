#!/usr/bin/env python3
"""The table of `make bench` (scripts/bench.sh): throughput, ratios and the Postgres work per
step of the pgbench baseline, Graphile Worker and rara-bench, from their --json reports.

    scripts/bench-table.py PGBENCH.json [GRAPHILE.json] RARA.json...

Prints Markdown (the form BENCHMARKS.md keeps), then the per-step ratios of each rara run
against each peer, rara's old figures (targets of issue 3) and its top statements when
pg_stat_statements is loaded.
"""

import json
import sys


def fmt(value, digits=3):
    return "n/a" if value is None else f"{value:,.{digits}f}"


def name(report):
    if "batch" in report:
        packed = report.get("steps_per_message", 1.0)
        operation = "" if report.get("operation", "noop") == "noop" else f" {report['operation']}"
        if packed > 1.05:
            return f"rara{operation} batch {report['batch']} × {packed:.0f} steps/message"
        return f"rara{operation} batch {report['batch']}"
    if report.get("system") == "graphile-worker":
        return f"Graphile Worker {report['version']}"
    return "pgbench"


def main():
    reports = [json.load(open(path)) for path in sys.argv[1:]]
    peers = [r for r in reports if "batch" not in r]
    rara = [r for r in reports if "batch" in r]
    pgbench = next(r for r in peers if name(r) == "pgbench")
    graphile = next((r for r in peers if name(r) != "pgbench"), None)

    print("| system | steps/s | rara ÷ pgbench | rara ÷ Graphile | commits/step | Postgres CPU ms/step: backends / background / cluster | WAL bytes/step | tuples written/step | HOT updates | load (1 m) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in reports:
        pg = r["postgres"]
        cpu = pg["cpu_ms_per_unit"]
        is_rara = "batch" in r
        vs_pgbench = f"{r['steps_per_s'] / pgbench['steps_per_s']:.2f}×" if is_rara else ""
        vs_graphile = f"{r['steps_per_s'] / graphile['steps_per_s']:.2f}×" if is_rara and graphile else ""
        hot = "n/a" if pg["hot_update_share"] is None else f"{pg['hot_update_share'] * 100:.0f} % ({pg['table']})"
        load = pg["load_average_1m"]
        print(
            f"| {name(r)} | {r['steps_per_s']:,.0f} | {vs_pgbench} | {vs_graphile} | {pg['commits_per_unit']:.3f} | "
            f"{fmt(cpu['backends'])} / {fmt(cpu['background'])} / {fmt(cpu['cluster'])} | {pg['wal_bytes_per_unit']:,.0f} | "
            f"{pg['tuples_written_per_unit']:.2f} | {hot} | {load[0]:.2f} → {load[1]:.2f} |"
        )

    def ratio(a, b):
        return "n/a" if a is None or not b else f"{a / b:.2f}×"

    for r in rara:
        pg = r["postgres"]
        for peer in peers:
            other = peer["postgres"]
            print(
                f"{name(r)} per step ÷ {name(peer)} per job: Postgres CPU (backends) "
                f"{ratio(pg['cpu_ms_per_unit']['backends'], other['cpu_ms_per_unit']['backends'])}, (cluster) "
                f"{ratio(pg['cpu_ms_per_unit']['cluster'], other['cpu_ms_per_unit']['cluster'])}, WAL bytes "
                f"{ratio(pg['wal_bytes_per_unit'], other['wal_bytes_per_unit'])}, tuples written "
                f"{ratio(pg['tuples_written_per_unit'], other['tuples_written_per_unit'])}, commits "
                f"{ratio(pg['commits_per_unit'], other['commits_per_unit'])}"
            )
    for r in rara:
        lat = r["latency_ms"]
        print(
            f"{name(r)}: {r['steps_per_s'] / pgbench['steps_per_s']:.2f}× pgbench (target >= 3×); "
            f"commits/step {r['commits_per_step']:.3f} (target <= 0.35 at batch 10); due->claimed p50/p95/p99 "
            f"{lat['p50']:.0f}/{lat['p95']:.0f}/{lat['p99']:.0f} ms (backlog); CPU/1000 steps rara "
            f"{r['cpu']['process_per_1000_steps_s']:.3f} s; peak RSS {r['peak_rss_mb']:.0f} MiB; AWS "
            f"${r['aws_estimate']['total_usd_per_million_steps']:.3f} per million steps"
        )
        for s in r.get("top_statements", []):
            print(f"    {s['exec_ms_per_step']:.4f} ms/step, {s['calls_per_step']:.3f} calls/step: {s['query']}")
    grid(rara, graphile)


def packing(report):
    """The steps per message a rara run was set to (bench.sh records it), else as measured."""
    return report.get("requested_steps_per_message", round(report.get("steps_per_message", 1.0)))


def grid(rara, graphile):
    """Issue 50's grid: a row per operation and batch, a cell per steps per message (as the
    report measured it), Graphile's figure of the same run beside it; each cell's share of
    its row's best (no cell may fall below a fifth)."""
    rows = {}
    for r in rara:
        rows.setdefault((r.get("operation", "noop"), r["batch"]), []).append(r)
    if not rows:
        return
    packings = sorted({packing(r) for r in rara})
    peer = f"{graphile['steps_per_s']:,.0f}" if graphile else "n/a"
    print()
    print("| operation | batch | " + " | ".join(f"× {p} steps/message" for p in packings) + " | Graphile (same run) | worst ÷ best |")
    print("| --- | --- | " + " | ".join("---" for _ in packings) + " | --- | --- |")
    for (operation, batch), cells in sorted(rows.items()):
        by = {packing(r): r["steps_per_s"] for r in cells}
        best = max(by.values())
        worst = min(by.values())
        shown = " | ".join(f"{by[p]:,.0f}" if p in by else "" for p in packings)
        flag = "" if worst >= best / 5 else " **below a fifth**"
        print(f"| {operation} | {batch} | {shown} | {peer} | {worst / best:.2f}{flag} |")


if __name__ == "__main__":
    main()
