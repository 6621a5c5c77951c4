//! What the operating system and Postgres say about a run: CPU seconds of this process and
//! of the scratch database's backends (`/proc/<pid>/stat`, when the server is local), peak
//! RSS (`VmHWM`), the load average, and the database's counters (`pg_stat_database`, read
//! from another database so the scratch one's connections can all be closed first).

use std::collections::HashMap;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, PgPool};

/// Linux reports process CPU in clock ticks of USER_HZ, which is 100 on every architecture
/// rara targets (x86_64, arm64).
const TICKS_PER_SECOND: f64 = 100.0;

/// A pool of exactly `connections`, without slow-statement warnings: the measurement's own
/// queries (the history fill, the latency percentiles) are slow by design.
pub async fn pool(options: &PgConnectOptions, connections: u32) -> Result<PgPool, sqlx::Error> {
    PgPoolOptions::new()
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

/// utime + stime of a process (`"self"` or a pid), in seconds.
pub fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command (which may contain spaces) start at field 3 (state).
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / TICKS_PER_SECOND)
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
