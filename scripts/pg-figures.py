#!/usr/bin/env python3
"""The Postgres work of one command, per unit of work (a job, a step): the peers' half of the
figures rara-bench prints (tools/bench/src/system.rs reads the same counters; BENCHMARKS.md,
"Method").

    scripts/pg-figures.py --url SCRATCH_URL --out FILE [--units N | --units-sql SQL]
                          [--table TABLE] -- COMMAND [ARG]...

Runs COMMAND (its stdout and stderr are this script's) and writes to FILE one JSON object:

- cpu_ms_per_unit.backends: CPU of the scratch database's backends (/proc/<pid>/stat of the
  postmaster's children whose title names the database, sampled every 0.2 s, so a backend
  that exits loses at most its last 0.2 s);
- cpu_ms_per_unit.background: walwriter, checkpointer, background writer, autovacuum launcher
  and workers, logical replication launcher (the same sampling);
- cpu_ms_per_unit.cluster: the postmaster and every process it ever had during COMMAND (its
  utime + stime + cutime + cstime plus its live children's): every database's backends;
- wal_bytes_per_unit: pg_wal_lsn_diff of pg_current_wal_lsn() (cluster-wide);
- commits_per_unit, tuples_written_per_unit (inserted + updated + deleted): pg_stat_database
  of the scratch database, read from the `postgres` database after its backends exited;
- hot_update_share: n_tup_hot_upd / n_tup_upd of TABLE (pg_stat_user_tables, since creation);
- load_average_1m: before and after.

The CPU figures are null when the server is not on this machine (no /proc of the postmaster).
Units: N, or the first value of SQL run on the scratch database after COMMAND.
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse

TICKS = os.sysconf("SC_CLK_TCK")
BACKGROUND = ("walwriter", "checkpointer", "background writer", "autovacuum", "logical replication", "archiver")


def psql(url, sql):
    out = subprocess.run(["psql", "-AtqX", "-F", "\t", url, "-c", sql], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def with_database(url, database):
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path="/" + database))


def stat(pid):
    """(ppid, own CPU s, reaped children's CPU s) of a process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS, (int(fields[13]) + int(fields[14])) / TICKS


def title(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class Cpu:
    """The postmaster's children, sampled: the largest CPU seen per pid, by kind."""

    def __init__(self, postmaster, database):
        self.postmaster, self.database = postmaster, database
        self.first, self.last, self.kind = {}, {}, {}

    def children(self):
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                s = stat(entry)
                if s and s[0] == self.postmaster:
                    yield int(entry), s[1] + s[2]

    def classify(self, pid):
        t = title(pid)
        if any(word in t for word in BACKGROUND):
            return "background"
        return "backends" if self.database in t.split() else "other"

    def sample(self):
        for pid, cpu in self.children():
            if pid not in self.kind:
                self.kind[pid] = self.classify(pid)
            self.first.setdefault(pid, cpu)
            self.last[pid] = cpu

    def cluster(self):
        """The postmaster with its reaped children plus its live children: every process the
        cluster ever had, since the postmaster started."""
        s = stat(self.postmaster)
        return s[1] + s[2] + sum(cpu for _, cpu in self.children()) if s else None

    def used(self, kind, started):
        # A process that started after the first sample counts from 0.
        return sum(self.last[p] - (self.first[p] if p in started else 0) for p in self.last if self.kind[p] == kind)


def counters(admin, database):
    row = psql(
        admin,
        "SELECT pg_current_wal_lsn(), xact_commit, xact_rollback, tup_inserted, tup_updated, tup_deleted "
        f"FROM pg_stat_database WHERE datname = '{database}'",
    ).split("\t")
    high, low = row[0].split("/")
    return {"wal": (int(high, 16) << 32) + int(low, 16), **dict(zip(("commits", "rollbacks", "ins", "upd", "del"), map(int, row[1:])))}


def load():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--units", type=float)
    parser.add_argument("--units-sql")
    parser.add_argument("--table")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    database = urllib.parse.urlsplit(args.url).path.lstrip("/")
    admin = with_database(args.url, "postgres")

    pid_file = os.path.join(psql(admin, "SHOW data_directory"), "postmaster.pid")
    try:
        with open(pid_file) as f:
            cpu = Cpu(int(f.readline()), database)
    except OSError:
        cpu = None  # a remote server

    load_before = load()
    before = counters(admin, database)
    cluster_before = cpu.cluster() if cpu else None
    if cpu:
        cpu.sample()
    started = set(cpu.first) if cpu else set()
    done = threading.Event()

    def sampler():
        while not done.wait(0.2):
            cpu.sample()

    thread = threading.Thread(target=sampler, daemon=True) if cpu else None
    if thread:
        thread.start()
    status = subprocess.run(command).returncode
    # Exiting backends flush their statistics: wait until the scratch database has none.
    for _ in range(100):
        if psql(admin, f"SELECT count(*) FROM pg_stat_activity WHERE datname = '{database}'") == "0":
            break
        time.sleep(0.05)
    done.set()
    if thread:
        thread.join()
        cpu.sample()
    after = counters(admin, database)
    cluster_after = cpu.cluster() if cpu else None
    load_after = load()
    if status != 0:
        sys.exit(status)

    units = args.units if args.units is not None else float(psql(args.url, args.units_sql))
    hot = None
    if args.table:
        upd, hot_upd = map(int, psql(args.url, f"SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = '{args.table}'").split("\t"))
        hot = hot_upd / upd if upd else None
    per = lambda n: None if n is None else n / max(units, 1)
    ms = lambda s: None if s is None else per(s * 1000)
    delta = {k: after[k] - before[k] for k in before}
    figures = {
        "units": units,
        "cpu_ms_per_unit": {
            "backends": ms(cpu.used("backends", started)) if cpu else None,
            "background": ms(cpu.used("background", started)) if cpu else None,
            "cluster": ms(cluster_after - cluster_before) if cpu else None,
        },
        "wal_bytes_per_unit": per(delta["wal"]),
        "commits_per_unit": per(delta["commits"]),
        "tuples_written_per_unit": per(delta["ins"] + delta["upd"] + delta["del"]),
        "hot_update_share": hot,
        "table": args.table,
        "load_average_1m": [load_before, load_after],
    }
    with open(args.out, "w") as f:
        json.dump(figures, f)


if __name__ == "__main__":
    main()
