//! What the operating system and Postgres say about a run: CPU seconds of this process, of
//! the scratch database's backends and of the whole cluster (`/proc/<pid>/stat`, when the
//! server is local), peak RSS (`VmHWM`), the load average, the WAL position, and the
//! database's counters (`pg_stat_database`, read from another database so the scratch one's
//! connections can all be closed first). `scripts/pg-figures.py` reads the same for the
//! peers (pgbench, Graphile Worker).

use std::collections::HashMap;
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, PgPool};

/// Linux reports process CPU in clock ticks of USER_HZ, which is 100 on every architecture
/// rara targets (x86_64, arm64).
const TICKS_PER_SECOND: f64 = 100.0;

/// A pool of exactly `connections`, checked like the runners' ([`rara_store::pool_options`]),
/// without slow-statement warnings: the measurement's own queries (the history fill, the
/// latency percentiles) are slow by design.
pub async fn pool(options: &PgConnectOptions, connections: u32) -> Result<PgPool, sqlx::Error> {
    rara_store::pool_options()
        .max_connections(connections)
        .min_connections(connections)
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(options.clone().log_slow_statements(log::LevelFilter::Off, Duration::ZERO))
        .await
}

/// The 1-minute load average (NaN when unknown).
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(f64::NAN)
}

/// What `/proc/<pid>/stat` says of a process's CPU, in seconds.
#[derive(Debug, Clone, Copy)]
struct ProcStat {
    ppid: i32,
    /// utime + stime.
    own: f64,
    /// cutime + cstime: the children it has waited for.
    reaped: f64,
}

fn proc_stat(pid: &str) -> Option<ProcStat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command (which may contain spaces) start at field 3 (state).
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok());
    Some(ProcStat {
        ppid: fields.get(1)?.parse().ok()?,
        own: (ticks(11)? + ticks(12)?) / TICKS_PER_SECOND,
        reaped: (ticks(13)? + ticks(14)?) / TICKS_PER_SECOND,
    })
}

/// utime + stime of a process (`"self"` or a pid), in seconds.
pub fn cpu_seconds(pid: &str) -> Option<f64> {
    proc_stat(pid).map(|s| s.own)
}

/// This process's peak resident memory, MiB (NaN when unknown).
pub fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("VmHWM:").and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            })
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// CPU seconds of every backend connected to `database`, by pid (`None`: not readable).
pub type BackendCpu = HashMap<i32, Option<f64>>;

pub async fn backend_cpu(admin: &PgPool, database: &str) -> Result<BackendCpu, sqlx::Error> {
    let pids: Vec<i32> = sqlx::query_scalar("SELECT pid FROM pg_stat_activity WHERE datname = $1")
        .bind(database)
        .fetch_all(admin)
        .await?;
    Ok(pids.into_iter().map(|pid| (pid, cpu_seconds(&pid.to_string()))).collect())
}

/// CPU seconds the backends used between two readings; `None` if any was unreadable.
pub fn backend_cpu_used(before: &BackendCpu, after: &BackendCpu) -> Option<f64> {
    let mut sum = 0.0;
    let mut readable = true;
    for (pid, after) in after {
        match (after, before.get(pid)) {
            (Some(a), Some(Some(b))) => sum += a - b,
            (Some(a), None) => sum += a,
            _ => readable = false,
        }
    }
    readable.then_some(sum)
}

/// Titles of the cluster's background processes (`postgres: [cluster name: ]walwriter`, …).
const BACKGROUND: [&str; 6] =
    ["walwriter", "checkpointer", "background writer", "autovacuum", "logical replication", "archiver"];

/// The whole cluster's CPU at one moment (cluster-wide: every database's backends too).
#[derive(Debug, Clone, Default)]
pub struct ClusterCpu {
    /// The postmaster with every child it has reaped, plus its live children: all the CPU the
    /// cluster used since it started.
    total: f64,
    /// The live background processes, by pid (walwriter, checkpointer, autovacuum, …).
    background: BackendCpu,
}

/// `None` when the server's processes are not on this machine (or not readable).
pub async fn cluster_cpu(admin: &PgPool) -> Result<Option<ClusterCpu>, sqlx::Error> {
    // The admin pool keeps its connection, so its backend is alive while we read it.
    let backend: i32 = sqlx::query_scalar("SELECT pg_backend_pid()").fetch_one(admin).await?;
    let Some(postmaster) = proc_stat(&backend.to_string()).map(|s| s.ppid) else { return Ok(None) };
    let Some(root) = proc_stat(&postmaster.to_string()) else { return Ok(None) };
    let mut cpu = ClusterCpu { total: root.own + root.reaped, background: HashMap::new() };
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Some(stat) = proc_stat(&pid.to_string()).filter(|s| s.ppid == postmaster) else { continue };
        cpu.total += stat.own + stat.reaped;
        let title = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let title = String::from_utf8_lossy(&title);
        if BACKGROUND.iter().any(|b| title.contains(b)) {
            cpu.background.insert(pid, Some(stat.own));
        }
    }
    Ok(Some(cpu))
}

/// CPU seconds between two readings: (the cluster's, its background processes'). An
/// autovacuum worker that came and went between them is in the first only.
pub fn cluster_cpu_used(before: &Option<ClusterCpu>, after: &Option<ClusterCpu>) -> (Option<f64>, Option<f64>) {
    match (before, after) {
        (Some(b), Some(a)) => (Some(a.total - b.total), backend_cpu_used(&b.background, &a.background)),
        _ => (None, None),
    }
}

/// The WAL position in bytes (`pg_current_wal_lsn()`, cluster-wide).
pub async fn wal_bytes(admin: &PgPool) -> Result<f64, sqlx::Error> {
    sqlx::query_scalar("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8").fetch_one(admin).await
}

/// The counters of one database (`pg_stat_database`).
#[derive(Debug, Clone, Copy, Default, sqlx::FromRow)]
pub struct DbStats {
    pub xact_commit: i64,
    pub xact_rollback: i64,
    pub tup_inserted: i64,
    pub tup_updated: i64,
    pub tup_deleted: i64,
    pub tup_returned: i64,
    pub tup_fetched: i64,
}

pub async fn db_stats(admin: &PgPool, database: &str) -> Result<DbStats, sqlx::Error> {
    sqlx::query_as(
        "SELECT xact_commit, xact_rollback, tup_inserted, tup_updated, tup_deleted, tup_returned, tup_fetched
         FROM pg_stat_database WHERE datname = $1",
    )
    .bind(database)
    .fetch_one(admin)
    .await
}

/// Whether pg_stat_statements is loaded on the server (`scripts/bench-postgres.sh` loads it;
/// the machine's server does not). If so, creates its view in the admin database and resets
/// the statistics of `database`, so that [`top_statements`] sees the timed part only.
pub async fn statements_reset(admin: &PgPool, database: &str) -> Result<bool, sqlx::Error> {
    let loaded: bool = sqlx::query_scalar("SELECT current_setting('shared_preload_libraries') ~ 'pg_stat_statements'")
        .fetch_one(admin)
        .await?;
    if loaded {
        sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements").execute(admin).await?;
        sqlx::query("SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = $1), 0)")
            .bind(database)
            .execute(admin)
            .await?;
    }
    Ok(loaded)
}

/// One statement of `pg_stat_statements`: its text (comments dropped, whitespace folded, cut
/// at 140 characters), calls and total execution time in milliseconds.
pub type Statement = (String, i64, f64);

/// The statements of `database` that took the most execution time, the largest first.
pub async fn top_statements(admin: &PgPool, database: &str, limit: i64) -> Result<Vec<Statement>, sqlx::Error> {
    sqlx::query_as(
        "SELECT left(btrim(regexp_replace(regexp_replace(query, '--[^\\n]*', '', 'g'), '\\s+', ' ', 'g')), 140),
                calls, total_exec_time
         FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)
         ORDER BY total_exec_time DESC LIMIT $2",
    )
    .bind(database)
    .bind(limit)
    .fetch_all(admin)
    .await
}
