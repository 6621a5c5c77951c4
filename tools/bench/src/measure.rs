//! What a throughput run is measured by, read before the loops start ([`Before`]), when
//! they finish ([`After`]) and from the scratch database afterwards ([`report`]); a soak's
//! latency is read minute by minute while it runs ([`crate::minutes`]).
//!
//! Commits per step: the `pg_stat_database.xact_commit` delta of the scratch database, read
//! from another database after every scratch connection closed so their statistics are
//! flushed. Due-to-claimed: `step_attempts.started_at` of attempt 1 minus the moment the step
//! became due (the start of the measurement for steps without dependencies, the last
//! dependency's `finished_at` otherwise; a soak's: [`crate::minutes`]). CPU: this process and the scratch database's
//! backends, the cluster's background processes and the whole cluster. WAL bytes: the
//! `pg_current_wal_lsn()` delta (cluster-wide). Queue requests: counted by
//! [`Counted`](crate::counted::Counted).

use anyhow::bail;
use chrono::{DateTime, Utc};
use rara_runtime::metrics::Counters;
use rara_testkit::scratch::ScratchDb;
use sqlx::PgPool;
use tokio::time::Instant;

use crate::counted::{Instants, QueueStats};
use crate::minutes::Readings;
use crate::options::{Mode, Options};
use crate::report::{
    Cpu, Latency, PostgresCpuMs, PostgresWork, QueueRequests, Report, TopStatement, Tuples, percentiles,
};
use crate::system::{self, BackendCpu, ClusterCpu, DbStats, Statement};

/// Read just before the loops start.
#[derive(Debug)]
pub struct Before {
    load: f64,
    db: DbStats,
    backends: BackendCpu,
    cluster: Option<ClusterCpu>,
    wal: f64,
    cpu: f64,
    /// Whether pg_stat_statements is loaded (its statistics of the scratch database reset).
    pub statements: bool,
    /// The start, by the database's clock and by ours.
    pub t0_db: DateTime<Utc>,
    pub t0: Instant,
}

impl Before {
    pub async fn take(admin: &PgPool, database: &str) -> anyhow::Result<Self> {
        let load = system::load_average();
        let db = system::db_stats(admin, database).await?;
        let backends = system::backend_cpu(admin, database).await?;
        let statements = system::statements_reset(admin, database).await?;
        let cluster = system::cluster_cpu(admin).await?;
        let wal = system::wal_bytes(admin).await?;
        let cpu = system::cpu_seconds("self").unwrap_or(0.0);
        let t0_db = sqlx::query_scalar("SELECT clock_timestamp()").fetch_one(admin).await?;
        Ok(Before { load, db, backends, cluster, wal, cpu, statements, t0_db, t0: Instant::now() })
    }
}

/// Read when the loops finish; `db` and `statements` once their connections are closed.
#[derive(Debug)]
pub struct After {
    finished: Finished,
    load: f64,
    backends: BackendCpu,
    cluster: Option<ClusterCpu>,
    wal: f64,
    cpu: f64,
    pub db: DbStats,
    /// The top statements of pg_stat_statements (empty when it is not loaded).
    pub statements: Vec<Statement>,
}

impl After {
    pub async fn take(admin: &PgPool, database: &str, finished: Finished) -> anyhow::Result<Self> {
        let cpu = system::cpu_seconds("self").unwrap_or(0.0);
        let load = system::load_average();
        let backends = system::backend_cpu(admin, database).await?;
        let cluster = system::cluster_cpu(admin).await?;
        let wal = system::wal_bytes(admin).await?;
        Ok(After { finished, load, backends, cluster, wal, cpu, db: DbStats::default(), statements: Vec::new() })
    }
}

/// The in-memory logs of a `rate` run: when each step's message was sent, and when each
/// run's submission started.
#[derive(Debug, Clone, Copy)]
pub struct Logs<'a> {
    pub sent_at: &'a Instants,
    pub run_due_at: &'a Instants,
}

/// Reads the scratch database after the run and puts the report together.
#[allow(clippy::too_many_arguments, reason = "the parts of one finished run, each read at its moment")]
pub async fn report(
    options: &Options,
    scratch: &ScratchDb,
    stats: &QueueStats,
    before: &Before,
    after: &After,
    scheduler: &Counters,
    submitted: u64,
    logs: Logs<'_>,
) -> anyhow::Result<Report> {
    // A soak's steps are those of its minutes (the loops went on while the last was read).
    let steps = match options.mode.soak() {
        Some(_) => after.finished.per_minute.iter().sum(),
        None => submitted,
    };
    let check = system::pool(&scratch.connect_options(), 1).await?;
    let result = read(&check, options, steps, before.t0_db, &after.finished, logs).await;
    check.close().await;
    let read = result?;
    Ok(assemble(options, stats, before, after, scheduler, steps, read))
}

/// What the scratch database says about a finished run.
struct Read {
    latency: Latency,
    reads_per_step: Vec<(String, f64)>,
    steps_hot_update_ratio: f64,
    due_to_enqueued: Option<Latency>,
}

async fn read(
    check: &PgPool,
    options: &Options,
    steps: u64,
    t0_db: DateTime<Utc>,
    finished: &Finished,
    logs: Logs<'_>,
) -> anyhow::Result<Read> {
    // A soak stops with steps under way, and its retention may have deleted finished ones.
    if options.mode.soak().is_none() {
        let succeeded: i64 =
            sqlx::query_scalar("SELECT count(*) FROM steps WHERE status = 'succeeded'").fetch_one(check).await?;
        if succeeded as u64 != steps {
            bail!("only {succeeded} of {steps} steps succeeded");
        }
    }
    let (updates, hot_updates): (i64, i64) =
        sqlx::query_as("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'steps'")
            .fetch_one(check)
            .await?;
    let latency = match options.mode {
        Mode::Soak { .. } => finished.minutes.whole.latency(),
        _ => due_to_claimed(check, t0_db).await?,
    };
    let due_to_enqueued = match options.mode {
        Mode::Rate(_) => Some(due_to_enqueued(check, logs).await?),
        _ => None,
    };
    Ok(Read {
        latency,
        reads_per_step: reads_per_step(check, steps).await?,
        steps_hot_update_ratio: hot_updates as f64 / updates.max(1) as f64,
        due_to_enqueued,
    })
}

/// Due-to-claimed percentiles of every step (p50, p95, p99, max).
async fn due_to_claimed(check: &PgPool, t0_db: DateTime<Utc>) -> Result<Latency, sqlx::Error> {
    let latency: Vec<Option<f64>> = sqlx::query_scalar(
        "SELECT unnest(percentile_cont(ARRAY[0.5, 0.95, 0.99, 1.0]) WITHIN GROUP (ORDER BY ms))
         FROM (SELECT extract(epoch FROM a.started_at - greatest(coalesce(dep.due, s.created_at), $1)) * 1000 AS ms
               FROM steps s
               JOIN step_attempts a ON a.step_id = s.id AND a.attempt = 1
               LEFT JOIN LATERAL (SELECT max(d.finished_at) AS due
                                  FROM step_dependencies sd JOIN steps d ON d.id = sd.depends_on
                                  WHERE sd.step_id = s.id) dep ON true) x",
    )
    .bind(t0_db)
    .fetch_all(check)
    .await?;
    let pct = |i: usize| latency.get(i).copied().flatten().unwrap_or(f64::NAN);
    Ok(Latency { p50: pct(0), p95: pct(1), p99: pct(2), max: pct(3) })
}

/// Where the reads went: tuples read per step by relation (sequential scans of tables, index
/// scans of indexes), the largest first. Includes the submission's reads (small: inserts
/// read little).
async fn reads_per_step(check: &PgPool, steps: u64) -> Result<Vec<(String, f64)>, sqlx::Error> {
    let reads: Vec<(String, i64)> = sqlx::query_as(
        "SELECT relname || ' (seq)', seq_tup_read FROM pg_stat_user_tables WHERE seq_tup_read > 0
         UNION ALL
         SELECT indexrelname, idx_tup_read FROM pg_stat_user_indexes WHERE idx_tup_read > 0
         ORDER BY 2 DESC LIMIT 8",
    )
    .fetch_all(check)
    .await?;
    Ok(reads
        .into_iter()
        .map(|(relation, n)| (relation, (n as f64 / steps.max(1) as f64 * 10.0).round() / 10.0))
        .collect())
}

/// Rate: from the start of each step's submission to its message being sent.
async fn due_to_enqueued(check: &PgPool, logs: Logs<'_>) -> anyhow::Result<Latency> {
    let steps_of_runs: Vec<(uuid::Uuid, uuid::Uuid)> =
        sqlx::query_as("SELECT id, run_id FROM steps").fetch_all(check).await?;
    let sent_at = logs.sent_at.lock().map_err(|_| anyhow::anyhow!("the send log was poisoned"))?;
    let due_at = logs.run_due_at.lock().map_err(|_| anyhow::anyhow!("the submission log was poisoned"))?;
    let ms: Vec<f64> = steps_of_runs
        .iter()
        .filter_map(|(step, run)| Some(sent_at.get(step)?.duration_since(*due_at.get(run)?).as_secs_f64() * 1000.0))
        .collect();
    Ok(percentiles(ms))
}

fn assemble(
    options: &Options,
    stats: &QueueStats,
    before: &Before,
    after: &After,
    scheduler: &Counters,
    steps: u64,
    read: Read,
) -> Report {
    let elapsed = after.finished.elapsed.as_secs_f64();
    let per_step = |n: f64| n / steps.max(1) as f64;
    let commits = (after.db.xact_commit - before.db.xact_commit).max(0) as u64;
    let rollbacks = (after.db.xact_rollback - before.db.xact_rollback).max(0) as u64;
    Report {
        mode: options.mode.name(),
        operation: options.operation.name(),
        queue: options.queue.name(),
        steps,
        batch: options.batch,
        steps_per_message: scheduler.sent as f64 / scheduler.messages.max(1) as f64,
        executors: options.executors,
        elapsed_s: elapsed,
        steps_per_s: steps as f64 / elapsed,
        commits,
        rollbacks,
        commits_per_step: per_step(commits as f64),
        statements_per_step: per_step((commits + rollbacks) as f64),
        // Per reaper run: two reaper statements; each statistics check and each ANALYZE.
        scheduler_statements: scheduler.lease_rounds
            + 2 * scheduler.reaper_runs
            + scheduler.statistics_checks
            + scheduler.statistics_refreshes,
        listen: options.listen,
        scheduler_wakeups: scheduler.wakeups,
        tuples_per_step: tuples(&before.db, &after.db, steps),
        reads_per_step: read.reads_per_step,
        steps_hot_update_ratio: read.steps_hot_update_ratio,
        postgres: postgres_work(before, after, steps, read.steps_hot_update_ratio),
        top_statements: top_statements(&after.statements, steps),
        rate: options.mode.rate(),
        latency_ms: read.latency,
        due_to_enqueued_ms: read.due_to_enqueued,
        cpu: cpu(before, after, steps),
        peak_rss_mb: system::peak_rss_mb(),
        queue_requests_per_step: queue_requests(stats, steps),
        aws_estimate: crate::cost::estimate(stats, steps),
        load_average_1m: [before.load, after.load],
        steps_per_minute: after.finished.per_minute.clone(),
        latency_per_minute_ms: after.finished.minutes.latency.clone(),
        history_per_minute: after.finished.minutes.history.clone(),
        prune_after_s: options.mode.prune_after().map(|d| d.as_secs()),
    }
}

fn tuples(before: &DbStats, after: &DbStats, steps: u64) -> Tuples {
    let per_step = |d: i64| d as f64 / steps.max(1) as f64;
    Tuples {
        inserted: per_step(after.tup_inserted - before.tup_inserted),
        updated: per_step(after.tup_updated - before.tup_updated),
        deleted: per_step(after.tup_deleted - before.tup_deleted),
        returned: per_step(after.tup_returned - before.tup_returned),
        fetched: per_step(after.tup_fetched - before.tup_fetched),
    }
}

/// The Postgres work per step, in the shape `scripts/pg-figures.py` gives the peers'.
fn postgres_work(before: &Before, after: &After, steps: u64, hot_update_share: f64) -> PostgresWork {
    let per_step = |n: f64| n / steps.max(1) as f64;
    let ms = |s: Option<f64>| s.map(|s| per_step(s * 1000.0));
    let (cluster, background) = system::cluster_cpu_used(&before.cluster, &after.cluster);
    let (b, a) = (&before.db, &after.db);
    let written = (a.tup_inserted - b.tup_inserted) + (a.tup_updated - b.tup_updated) + (a.tup_deleted - b.tup_deleted);
    PostgresWork {
        units: steps,
        cpu_ms_per_unit: PostgresCpuMs {
            backends: ms(system::backend_cpu_used(&before.backends, &after.backends)),
            background: ms(background),
            cluster: ms(cluster),
        },
        wal_bytes_per_unit: per_step(after.wal - before.wal),
        commits_per_unit: per_step((a.xact_commit - b.xact_commit) as f64),
        tuples_written_per_unit: per_step(written as f64),
        hot_update_share,
        table: "steps",
        load_average_1m: [before.load, after.load],
    }
}

fn top_statements(statements: &[Statement], steps: u64) -> Vec<TopStatement> {
    let per_step = |n: f64| n / steps.max(1) as f64;
    statements
        .iter()
        .map(|(query, calls, ms)| TopStatement {
            query: query.clone(),
            calls_per_step: per_step(*calls as f64),
            exec_ms_per_step: per_step(*ms),
        })
        .collect()
}

fn cpu(before: &Before, after: &After, steps: u64) -> Cpu {
    let process_s = after.cpu - before.cpu;
    let postgres_s = system::backend_cpu_used(&before.backends, &after.backends);
    Cpu {
        process_s,
        postgres_backends_s: postgres_s,
        process_per_1000_steps_s: process_s * 1000.0 / steps.max(1) as f64,
        postgres_per_1000_steps_s: postgres_s.map(|s| s * 1000.0 / steps.max(1) as f64),
    }
}

fn queue_requests(stats: &QueueStats, steps: u64) -> QueueRequests {
    let q = |a| QueueStats::per_step(a, steps);
    QueueRequests {
        send: q(&stats.send_requests),
        receive: q(&stats.receive_requests),
        empty_receive: q(&stats.empty_receives),
        delete: q(&stats.delete_requests),
        change_visibility: q(&stats.change_visibility),
        total: q(&stats.send_requests)
            + q(&stats.receive_requests)
            + q(&stats.delete_requests)
            + q(&stats.change_visibility),
    }
}

/// How the loops ended: the measured time, and what each minute of a soak read.
#[derive(Debug)]
pub struct Finished {
    pub elapsed: std::time::Duration,
    /// Soak: steps finished in each minute.
    pub per_minute: Vec<u64>,
    /// Soak: latency and history of each minute.
    pub minutes: Readings,
}
