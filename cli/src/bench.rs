//! `rara bench`: noop steps end to end on the Postgres path, in one process.
//!
//! A scratch database (`rara_bench_<random>`) is created on the server of `DATABASE_URL`,
//! migrated, filled with N noop steps (flat, or `--dag`: chains of 5 fanning in to one
//! step), and drained by the handler code of the two Lambdas: `Scheduler::pass` in a loop
//! and K executor loops (`run_executor`, each with its own 2-connection pool, like one
//! Lambda container) receiving batches from an in-memory queue with SQS semantics (or SQS
//! itself with `--sqs`). The database is dropped at the end.
//!
//! Measured from the moment the loops start to the moment the last step's message is
//! deleted: steps/s; commits per step (`pg_stat_database.xact_commit` delta of the scratch
//! database, read from another database, after every scratch connection closed so their
//! statistics are flushed); tuples per step; due-to-claimed latency percentiles
//! (`step_attempts.started_at` of attempt 1 minus the moment the step became due: the start
//! of the measurement for steps without dependencies, the last dependency's `finished_at`
//! otherwise); CPU seconds per 1000 steps of this process (`/proc/self/stat`) and of the
//! scratch database's Postgres backends (`/proc/<pid>/stat`, when the server is local);
//! peak RSS (`VmHWM`). `--soak-minutes` keeps the queue topped up instead (or, with
//! `--rate`, submits at that steady rate) and prints the throughput of every minute, then
//! the due-to-claimed latency of every minute.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use rara_domain::workflow::{StepDefinition, WorkflowDefinition};
use rara_queue::memory::MemoryQueue;
use rara_queue::sqs::SqsQueue;
use rara_queue::{Outgoing, Queue, Received};
use rara_runtime::batch::BatchExecutor;
use rara_runtime::runner::{RunnerOptions, run_executor};
use rara_runtime::scheduler::Scheduler;
use rara_runtime::settings::Settings;
use rara_store::Store;
use serde::Serialize;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, PgPool};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::Failure;

/// Steps per submitted run (flat mode).
const RUN_SIZE: usize = 1000;
/// `--dag`: a unit is CHAINS chains of CHAIN_LENGTH steps, all feeding one fan-in step.
const CHAINS: usize = 4;
const CHAIN_LENGTH: usize = 5;
const UNIT: usize = CHAINS * CHAIN_LENGTH + 1;
/// Connections per executor loop and for the scheduler: what one Lambda container holds.
const POOL_CONNECTIONS: u32 = 2;
/// Soak mode keeps at most this many steps submitted and unfinished.
const SOAK_BACKLOG: u64 = 5000;
/// Linux reports process CPU in clock ticks of USER_HZ, which is 100 on every architecture
/// rara targets (x86_64, arm64).
const TICKS_PER_SECOND: f64 = 100.0;

/// AWS list prices used by the cost estimate: us-east-1, as published on
/// aws.amazon.com/lambda/pricing and aws.amazon.com/sqs/pricing (read 2025-06; not fetched
/// live, check before quoting). Lambda arm64, first 7.5 billion GB-s a month.
const LAMBDA_ARM64_USD_PER_GB_SECOND: f64 = 0.000_013_333_4;
const LAMBDA_USD_PER_REQUEST: f64 = 0.20 / 1e6;
/// SQS standard queue, after the first million requests a month (a request is ≤ 64 KiB).
const SQS_USD_PER_REQUEST: f64 = 0.40 / 1e6;
/// The template's defaults (infra/template.yaml): ExecutorMemorySize, SchedulerMemorySize.
const EXECUTOR_MEMORY_GB: f64 = 512.0 / 1024.0;
const SCHEDULER_MEMORY_GB: f64 = 256.0 / 1024.0;
/// The scheduler runs every minute for its budget (RARA_SCHEDULER_BUDGET_SECONDS = 50).
const SCHEDULER_SECONDS_PER_MONTH: f64 = 50.0 * 60.0 * 24.0 * 30.0;

/// What `rara bench` was asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    pub steps: usize,
    pub batch: u32,
    /// Gathering time for batches above 10 messages (the event source's batching window).
    pub batching_window: Duration,
    pub executors: u32,
    pub dag: bool,
    pub sqs: bool,
    pub poll: Duration,
    pub timeout: Duration,
    pub soak: Option<Duration>,
    /// Submit the steps at this rate (steps/s, in runs every 50 ms) while the loops run,
    /// instead of all before: due-to-claimed at a load below capacity.
    pub rate: Option<u32>,
    /// Whether the scheduler wakes on `NOTIFY` (`false`: it only polls every `poll`).
    pub listen: bool,
    /// `--scale`: time the claim against finished history instead (see [`crate::scale`]).
    pub scale: Option<crate::scale::Options>,
}

/// Counts every queue request (what SQS would bill) and, per executor, the time from a
/// non-empty receive to the delete of its batch (what Lambda would bill).
#[derive(Debug, Default)]
struct QueueStats {
    send_requests: AtomicU64,
    sent: AtomicU64,
    receive_requests: AtomicU64,
    empty_receives: AtomicU64,
    received: AtomicU64,
    delete_requests: AtomicU64,
    deleted: AtomicU64,
    change_visibility: AtomicU64,
    batches: AtomicU64,
    batch_nanos: AtomicU64,
}

struct Counted {
    inner: Arc<dyn Queue>,
    stats: Arc<QueueStats>,
    batch_started: std::sync::Mutex<Option<Instant>>,
    /// When each step's message was first handed to the queue (the scheduler's side).
    sent_at: Option<Arc<SentAt>>,
}

impl Counted {
    fn new(inner: Arc<dyn Queue>, stats: Arc<QueueStats>) -> Arc<Self> {
        Arc::new(Counted { inner, stats, batch_started: std::sync::Mutex::new(None), sent_at: None })
    }

    /// A queue that also records when each step's message was sent.
    fn recording(inner: Arc<dyn Queue>, stats: Arc<QueueStats>, sent_at: Arc<SentAt>) -> Arc<Self> {
        Arc::new(Counted { inner, stats, batch_started: std::sync::Mutex::new(None), sent_at: Some(sent_at) })
    }
}

type SentAt = std::sync::Mutex<HashMap<uuid::Uuid, Instant>>;

fn requests(n: usize) -> u64 {
    n.div_ceil(10) as u64
}

#[async_trait::async_trait]
impl Queue for Counted {
    async fn send(&self, messages: &[Outgoing]) -> Result<Vec<String>, rara_queue::Error> {
        self.stats.send_requests.fetch_add(requests(messages.len()), Ordering::Relaxed);
        self.stats.sent.fetch_add(messages.len() as u64, Ordering::Relaxed);
        if let Some(sent_at) = &self.sent_at {
            let now = Instant::now();
            if let Ok(mut map) = sent_at.lock() {
                for m in messages {
                    if let Ok(message) = rara_queue::StepMessage::parse(&m.body) {
                        map.entry(message.step_id).or_insert(now);
                    }
                }
            }
        }
        self.inner.send(messages).await
    }

    async fn change_visibility(&self, receipt_handle: &str, timeout: Duration) -> Result<(), rara_queue::Error> {
        self.stats.change_visibility.fetch_add(1, Ordering::Relaxed);
        self.inner.change_visibility(receipt_handle, timeout).await
    }

    async fn receive(&self, max: u32, wait: Duration) -> Result<Vec<Received>, rara_queue::Error> {
        let got = self.inner.receive(max, wait).await?;
        self.stats.receive_requests.fetch_add(1, Ordering::Relaxed);
        if got.is_empty() {
            self.stats.empty_receives.fetch_add(1, Ordering::Relaxed);
        } else {
            self.stats.received.fetch_add(got.len() as u64, Ordering::Relaxed);
            if let Ok(mut started) = self.batch_started.lock() {
                *started = Some(Instant::now());
            }
        }
        Ok(got)
    }

    async fn delete(&self, receipt_handles: &[String]) -> Result<Vec<String>, rara_queue::Error> {
        if let Some(started) = self.batch_started.lock().ok().and_then(|mut s| s.take()) {
            self.stats.batches.fetch_add(1, Ordering::Relaxed);
            self.stats.batch_nanos.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
        self.stats.delete_requests.fetch_add(requests(receipt_handles.len()), Ordering::Relaxed);
        let failed = self.inner.delete(receipt_handles).await?;
        self.stats.deleted.fetch_add((receipt_handles.len() - failed.len()) as u64, Ordering::Relaxed);
        Ok(failed)
    }

    async fn dead_letter(&self, body: &str, reason_code: &str, reason: &str) -> Result<(), rara_queue::Error> {
        self.inner.dead_letter(body, reason_code, reason).await
    }
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub mode: &'static str,
    pub queue: &'static str,
    pub steps: u64,
    pub batch: u32,
    pub executors: u32,
    pub elapsed_s: f64,
    pub steps_per_s: f64,
    pub commits: u64,
    pub rollbacks: u64,
    pub commits_per_step: f64,
    /// Every statement on this path runs in its own autocommit transaction, so statements
    /// = transactions (pg_stat_statements is not needed).
    pub statements_per_step: f64,
    /// Counted in the scheduler loop: 2 per reaper run (every `RARA_REAP_INTERVAL_MS`) + one
    /// lease statement per round.
    pub scheduler_statements: u64,
    /// Whether the scheduler woke on `NOTIFY` (else it polled every `--poll-ms`).
    pub listen: bool,
    /// Scheduler waits ended early by a `NOTIFY`.
    pub scheduler_wakeups: u64,
    pub tuples_per_step: Tuples,
    /// Tuples read per step by relation (`pg_stat_user_tables` / `pg_stat_user_indexes`).
    pub reads_per_step: Vec<(String, f64)>,
    /// Share of `steps` updates that were HOT (no new index entries).
    pub steps_hot_update_ratio: f64,
    /// `--rate`: the submission rate (steps/s); its submissions count in the commits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<u32>,
    pub latency_ms: Latency,
    /// `--rate`: from the start of a step's submission to its message being sent (due to
    /// enqueued; includes the submission statement).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub due_to_enqueued_ms: Option<Latency>,
    pub cpu: Cpu,
    pub peak_rss_mb: f64,
    pub queue_requests_per_step: QueueRequests,
    pub aws_estimate: AwsEstimate,
    pub load_average_1m: [f64; 2],
    /// Soak mode: steps finished in each minute (the last one scaled to 60 s if it was cut short).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps_per_minute: Vec<u64>,
    /// Soak: due-to-claimed of the steps claimed in each minute.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub latency_per_minute_ms: Vec<MinuteLatency>,
}

/// Due-to-claimed of the steps whose first attempt started in one minute of a soak.
#[derive(Debug, Serialize, sqlx::FromRow)]
pub struct MinuteLatency {
    /// 1 = the first minute after the loops started.
    pub minute: i32,
    pub claimed: i64,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
}

#[derive(Debug, Serialize, Default)]
pub struct Tuples {
    pub inserted: f64,
    pub updated: f64,
    pub deleted: f64,
    pub returned: f64,
    pub fetched: f64,
}

#[derive(Debug, Serialize, Default)]
pub struct Latency {
    /// Due to claimed (attempt 1 started).
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

#[derive(Debug, Serialize, Default)]
pub struct Cpu {
    pub process_s: f64,
    /// `None` when the backends' /proc entries cannot be read (a remote server).
    pub postgres_backends_s: Option<f64>,
    pub process_per_1000_steps_s: f64,
    pub postgres_per_1000_steps_s: Option<f64>,
}

#[derive(Debug, Serialize, Default)]
pub struct QueueRequests {
    pub send: f64,
    pub receive: f64,
    pub empty_receive: f64,
    pub delete: f64,
    pub change_visibility: f64,
    pub total: f64,
}

/// Estimated AWS cost per million noop steps (see the price constants and their date).
#[derive(Debug, Serialize, Default)]
pub struct AwsEstimate {
    pub price_date: &'static str,
    pub mean_batch_ms: f64,
    pub executor_invocations: f64,
    pub executor_gb_s: f64,
    pub lambda_compute_usd: f64,
    pub lambda_requests_usd: f64,
    pub sqs_requests_usd: f64,
    pub total_usd_per_million_steps: f64,
    /// Not per step: the scheduler runs every minute whether or not anything is due.
    pub scheduler_usd_per_month: f64,
}

fn cost(stats: &QueueStats, steps: u64) -> AwsEstimate {
    let batches = stats.batches.load(Ordering::Relaxed).max(1) as f64;
    let mean_batch_ms = stats.batch_nanos.load(Ordering::Relaxed) as f64 / batches / 1e6;
    let per_step = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 / steps.max(1) as f64;
    let million = 1e6;
    // Lambda's event source makes one invocation per non-empty batch; billed per 1 ms.
    let invocations = million * batches / steps.max(1) as f64;
    let gb_s = invocations * mean_batch_ms.ceil() / 1000.0 * EXECUTOR_MEMORY_GB;
    let lambda_compute_usd = gb_s * LAMBDA_ARM64_USD_PER_GB_SECOND;
    let lambda_requests_usd = invocations * LAMBDA_USD_PER_REQUEST;
    // Send batches (scheduler) + non-empty receives + delete batches (event source) +
    // visibility changes. Empty polls of the event source are billed too but depend on
    // traffic, not on steps: left out.
    let sqs_requests = million
        * (per_step(&stats.send_requests)
            + per_step(&stats.receive_requests)
            + per_step(&stats.delete_requests)
            + per_step(&stats.change_visibility)
            - per_step(&stats.empty_receives));
    let sqs_requests_usd = sqs_requests * SQS_USD_PER_REQUEST;
    AwsEstimate {
        price_date: "2025-06 (us-east-1 list prices, not fetched live)",
        mean_batch_ms,
        executor_invocations: invocations,
        executor_gb_s: gb_s,
        lambda_compute_usd,
        lambda_requests_usd,
        sqs_requests_usd,
        total_usd_per_million_steps: lambda_compute_usd + lambda_requests_usd + sqs_requests_usd,
        scheduler_usd_per_month: SCHEDULER_SECONDS_PER_MONTH * SCHEDULER_MEMORY_GB * LAMBDA_ARM64_USD_PER_GB_SECOND,
    }
}

pub(crate) fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(f64::NAN)
}

/// utime + stime of a process, in seconds.
fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command (which may contain spaces) start at field 3 (state).
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / TICKS_PER_SECOND)
}

fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("VmHWM:").and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            })
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// CPU seconds of every backend connected to `database`, by pid.
async fn backend_cpu(admin: &PgPool, database: &str) -> Result<HashMap<i32, Option<f64>>, sqlx::Error> {
    let pids: Vec<i32> = sqlx::query_scalar("SELECT pid FROM pg_stat_activity WHERE datname = $1")
        .bind(database)
        .fetch_all(admin)
        .await?;
    Ok(pids.into_iter().map(|pid| (pid, cpu_seconds(&pid.to_string()))).collect())
}

#[derive(Debug, Clone, Copy, Default, sqlx::FromRow)]
struct DbStats {
    xact_commit: i64,
    xact_rollback: i64,
    tup_inserted: i64,
    tup_updated: i64,
    tup_deleted: i64,
    tup_returned: i64,
    tup_fetched: i64,
}

async fn db_stats(admin: &PgPool, database: &str) -> Result<DbStats, sqlx::Error> {
    sqlx::query_as(
        "SELECT xact_commit, xact_rollback, tup_inserted, tup_updated, tup_deleted, tup_returned, tup_fetched
         FROM pg_stat_database WHERE datname = $1",
    )
    .bind(database)
    .fetch_one(admin)
    .await
}

async fn pool(options: &PgConnectOptions, connections: u32) -> Result<PgPool, sqlx::Error> {
    PgPoolOptions::new()
        .max_connections(connections)
        .min_connections(connections)
        .acquire_timeout(Duration::from_secs(30))
        // The measurement's own queries (the history fill, the latency percentiles) are slow
        // by design: no warnings for them.
        .connect_with(options.clone().log_slow_statements(log::LevelFilter::Off, Duration::ZERO))
        .await
}

/// The workflows to submit: about `steps` noop steps in runs of about a thousand.
fn workflows(steps: usize, dag: bool) -> Vec<WorkflowDefinition> {
    let step = |name: String, depends_on: Vec<String>| StepDefinition {
        name,
        operation: "noop".into(),
        version: None,
        input: serde_json::json!({}),
        depends_on,
        max_attempts: None,
        timeout_seconds: None,
        retry: None,
    };
    let mut runs = Vec::new();
    if dag {
        let units = steps.div_ceil(UNIT);
        let per_run = RUN_SIZE / UNIT;
        for first in (0..units).step_by(per_run) {
            let mut defs = Vec::new();
            for u in first..(first + per_run).min(units) {
                for c in 0..CHAINS {
                    for i in 0..CHAIN_LENGTH {
                        let deps = if i == 0 { vec![] } else { vec![format!("u{u}c{c}s{}", i - 1)] };
                        defs.push(step(format!("u{u}c{c}s{i}"), deps));
                    }
                }
                defs.push(step(
                    format!("u{u}join"),
                    (0..CHAINS).map(|c| format!("u{u}c{c}s{}", CHAIN_LENGTH - 1)).collect(),
                ));
            }
            runs.push(WorkflowDefinition { name: "bench-dag".into(), idempotency_key: None, steps: defs });
        }
    } else {
        let mut left = steps;
        while left > 0 {
            let n = left.min(RUN_SIZE);
            left -= n;
            let defs = (0..n).map(|i| step(format!("s{i}"), vec![])).collect();
            runs.push(WorkflowDefinition { name: "bench".into(), idempotency_key: None, steps: defs });
        }
    }
    runs
}

/// Submits `runs`; with `due_at`, records for each run the instant before its submission
/// started (its steps are due from the commit, a little later: the latency measured from
/// this instant includes the submission itself).
async fn submit_all(
    store: &Store,
    settings: &Settings,
    runs: &[WorkflowDefinition],
    due_at: Option<&SentAt>,
) -> anyhow::Result<u64> {
    let mut total = 0;
    for run in runs {
        let plan = run.plan(&settings.core)?;
        total += plan.steps.len() as u64;
        let before = Instant::now();
        let submitted = store.submit(&plan).await?;
        if let Some(Ok(mut map)) = due_at.map(|m| m.lock()) {
            map.insert(submitted.run_id, before);
        }
    }
    Ok(total)
}

fn settings(role: &str, queue_url: &str, dlq_url: Option<&str>) -> anyhow::Result<Settings> {
    let vars: HashMap<&str, String> = [
        ("RARA_QUEUE_URL", queue_url.to_owned()),
        ("RARA_DLQ_URL", dlq_url.unwrap_or("memory://rara-bench-dlq").to_owned()),
        ("RARA_LOG", "warn".to_owned()),
    ]
    .into_iter()
    .collect();
    let env = |k: &str| std::env::var(k).ok();
    Ok(Settings::from_lookup(role, |k| vars.get(k).cloned().or_else(|| env(k)))?)
}

/// Runs the benchmark and prints its report.
pub async fn bench(options: Options, json: bool) -> Result<(), Failure> {
    let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| rara_domain::config::DEFAULT_DATABASE_URL.to_owned());
    let base = PgConnectOptions::from_str(&url).context("DATABASE_URL is not a Postgres URL")?;
    let admin = pool(&base.clone().database("postgres"), 1).await.context("cannot reach Postgres")?;
    let name = format!("rara_bench_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    // The name is ours: a fixed prefix and hex digits.
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&admin)
        .await
        .context("cannot create the scratch database")?;
    let scratch = base.clone().database(&name);
    let outcome = match options.scale {
        Some(scale) => run_scale(scale, &scratch).await.map(Output::Scale),
        None => run(&options, &admin, &name, &scratch).await.map(Output::Throughput),
    };
    if let Err(e) = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).execute(&admin).await {
        eprintln!("warning: could not drop the scratch database {name}: {e}");
    }
    match (outcome?, json) {
        (Output::Throughput(report), true) => println!("{}", serde_json::to_string(&report).unwrap_or_default()),
        (Output::Throughput(report), false) => print_report(&report),
        (Output::Scale(report), true) => println!("{}", serde_json::to_string(&report).unwrap_or_default()),
        (Output::Scale(report), false) => crate::scale::print_report(&report),
    }
    Ok(())
}

#[allow(clippy::large_enum_variant, reason = "one value per process, printed and dropped")]
enum Output {
    Throughput(Report),
    Scale(crate::scale::Report),
}

async fn run_scale(options: crate::scale::Options, scratch: &PgConnectOptions) -> anyhow::Result<crate::scale::Report> {
    let pool = pool(scratch, 1).await.context("cannot connect to the scratch database")?;
    let store = Store::new(pool.clone());
    store.migrate().await?;
    let report = crate::scale::run(options, &pool, &store).await;
    pool.close().await;
    report
}

/// The queue under test: in memory, or a fresh SQS queue pair (`--sqs`).
struct QueueSetup {
    queue: Arc<dyn Queue>,
    url: String,
    dlq_url: Option<String>,
    memory: Option<Arc<MemoryQueue>>,
    /// The SQS queue and the URLs to delete at the end.
    sqs: Option<(Arc<SqsQueue>, [String; 2])>,
}

async fn queue_setup(sqs: bool, probe: &Settings) -> anyhow::Result<QueueSetup> {
    if !sqs {
        let memory = Arc::new(MemoryQueue::new(probe.core.visibility_timeout, probe.core.max_receive_count));
        return Ok(QueueSetup {
            queue: memory.clone(),
            url: "memory://rara-bench".into(),
            dlq_url: None,
            memory: Some(memory),
            sqs: None,
        });
    }
    let client = SqsQueue::client_from_env().await;
    let qname = format!("rara-bench-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let pair = rara_queue::sqs::create_queue_pair(
        &client,
        &qname,
        probe.core.visibility_timeout,
        probe.core.max_receive_count,
    )
    .await
    .context("cannot create the SQS queues (is AWS_ENDPOINT_URL pointing at LocalStack?)")?;
    let queue = Arc::new(SqsQueue::new(client, pair.queue_url.clone(), Some(pair.dlq_url.clone())));
    Ok(QueueSetup {
        queue: queue.clone(),
        url: pair.queue_url.clone(),
        dlq_url: Some(pair.dlq_url.clone()),
        memory: None,
        sqs: Some((queue, [pair.queue_url, pair.dlq_url])),
    })
}

async fn run(options: &Options, admin: &PgPool, name: &str, scratch: &PgConnectOptions) -> anyhow::Result<Report> {
    let probe = settings("bench", "memory://rara-bench", None)?;
    let setup = queue_setup(options.sqs, &probe).await?;
    let result = drive(options, admin, name, scratch, &setup).await;
    if let Some((queue, urls)) = &setup.sqs {
        for url in urls {
            let _ = queue.client().delete_queue().queue_url(url).send().await;
        }
    }
    result
}

async fn drive(
    options: &Options,
    admin: &PgPool,
    name: &str,
    scratch: &PgConnectOptions,
    setup: &QueueSetup,
) -> anyhow::Result<Report> {
    let mut settings = settings("bench-scheduler", &setup.url, setup.dlq_url.as_deref())?;
    settings.scheduler_poll = options.poll;
    settings.scheduler_listen = options.listen;
    let settings = Arc::new(settings);

    // Schema and the steps, before the measurement.
    let runs = workflows(options.steps, options.dag);
    let setup_pool = pool(scratch, 2).await.context("cannot connect to the scratch database")?;
    let setup_store = Store::new(setup_pool.clone());
    setup_store.migrate().await?;
    let preloaded = options.soak.is_none() && options.rate.is_none();
    let total = if preloaded { submit_all(&setup_store, &settings, &runs, None).await? } else { 0 };
    setup_pool.close().await;

    // One pool per "container": the scheduler's and one per executor loop.
    let scheduler_pool = pool(scratch, POOL_CONNECTIONS).await?;
    let mut executor_pools = Vec::new();
    for _ in 0..options.executors {
        executor_pools.push(pool(scratch, POOL_CONNECTIONS).await?);
    }
    let soak_pool = if preloaded { None } else { Some(pool(scratch, 1).await?) };
    // Idle backends flush their statistics within a second.
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let stats = Arc::new(QueueStats::default());
    let registry = Arc::new(rara_runtime::wiring::standard_registry(&settings).await?);
    let stop = CancellationToken::new();

    let load_before = load_average();
    let db_before = db_stats(admin, name).await?;
    let backends_before = backend_cpu(admin, name).await?;
    let cpu_before = cpu_seconds("self").unwrap_or(0.0);
    let t0_db: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("SELECT clock_timestamp()").fetch_one(admin).await?;
    let t0 = Instant::now();

    // The scheduler: its continuous loop (passes, waiting for NOTIFY or the poll between).
    let sent_at = Arc::new(SentAt::default());
    let run_due_at = Arc::new(SentAt::default());
    // Due-to-enqueued is recorded per step in memory: for the bounded `--rate` runs only.
    let scheduler_queue = if options.rate.is_some() && options.soak.is_none() {
        Counted::recording(setup.queue.clone(), stats.clone(), sent_at.clone())
    } else {
        Counted::new(setup.queue.clone(), stats.clone())
    };
    let scheduler = Scheduler::new(Store::new(scheduler_pool.clone()), scheduler_queue, settings.clone());
    let scheduler_task = {
        let stop = stop.clone();
        tokio::spawn(async move { scheduler.run(None, stop).await })
    };

    let runner = RunnerOptions {
        batch_size: options.batch,
        batching_window: if options.batch > 10 { options.batching_window } else { Duration::ZERO },
        // SQS long-polls in whole seconds; the in-memory queue wakes on arrival.
        wait: if options.sqs { Duration::from_secs(1) } else { Duration::from_millis(200) },
        batch_timeout: settings.core.function_timeout,
        margin: settings.deadline_margin,
        until_idle: None,
    };
    let mut executor_tasks = Vec::new();
    for (i, executor_pool) in executor_pools.iter().enumerate() {
        let executor_settings = settings_for(&settings, i)?;
        let queue: Arc<dyn Queue> = Counted::new(setup.queue.clone(), stats.clone());
        let executor =
            BatchExecutor::new(Store::new(executor_pool.clone()), queue.clone(), registry.clone(), &executor_settings);
        let stop = stop.clone();
        let runner = runner.clone();
        executor_tasks.push(tokio::spawn(async move { run_executor(&executor, queue, &runner, stop).await }));
    }

    // Soak: keep the queue topped up with runs of RUN_SIZE flat steps. Rate: submit a run of
    // rate/20 flat steps every 50 ms until `options.steps` are submitted.
    let submitted = Arc::new(AtomicU64::new(total));
    let soak_task = soak_pool.as_ref().map(|p| {
        let store = Store::new(p.clone());
        let stop = stop.clone();
        let stats = stats.clone();
        let submitted = submitted.clone();
        let settings = settings.clone();
        let rate = options.rate;
        // A soak at a steady rate submits until the time is over.
        let target = if options.soak.is_some() { u64::MAX } else { options.steps as u64 };
        let due_at = run_due_at.clone();
        tokio::spawn(async move {
            if let Some(rate) = rate {
                let chunk = (rate as usize / 20).clamp(1, RUN_SIZE);
                let run = workflows(chunk, false);
                let mut tick = tokio::time::interval(Duration::from_millis(50));
                while !stop.is_cancelled() && submitted.load(Ordering::Relaxed) < target {
                    tick.tick().await;
                    let n = submit_all(&store, &settings, &run, Some(&due_at)).await?;
                    submitted.fetch_add(n, Ordering::Relaxed);
                }
                return Ok(());
            }
            let run = workflows(RUN_SIZE, false);
            while !stop.is_cancelled() {
                let done = stats.deleted.load(Ordering::Relaxed);
                if submitted.load(Ordering::Relaxed).saturating_sub(done) < SOAK_BACKLOG {
                    let n = submit_all(&store, &settings, &run, None).await?;
                    submitted.fetch_add(n, Ordering::Relaxed);
                } else {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            Ok::<(), anyhow::Error>(())
        })
    });

    // Progress, and the end: every step's message deleted (or the soak time is over).
    let target = if preloaded { total } else { options.steps as u64 };
    let bar = match options.soak {
        Some(_) => ProgressBar::new_spinner(),
        None => ProgressBar::new(target),
    };
    bar.set_style(
        ProgressStyle::with_template("{elapsed:>4} [{bar:40}] {pos}/{len} steps {per_sec} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let mut per_minute = Vec::new();
    let mut minute_start = (t0, 0u64);
    let elapsed = loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let done = stats.deleted.load(Ordering::Relaxed);
        bar.set_position(done);
        if let Some(soak) = options.soak {
            let over = t0.elapsed() >= soak;
            let seconds = minute_start.0.elapsed().as_secs_f64();
            // Every full minute, and the last one when the soak ends a little short of it.
            if seconds >= 60.0 || (over && seconds >= 30.0) {
                let n = ((done - minute_start.1) as f64 * 60.0 / seconds).round() as u64;
                per_minute.push(n);
                // Printed even when stderr is not a terminal (a hidden bar drops `println`).
                bar.suspend(|| eprintln!("minute {:>3}: {n} steps, {:.0} steps/s", per_minute.len(), n as f64 / 60.0));
                minute_start = (Instant::now(), done);
            }
            if over {
                break t0.elapsed();
            }
        } else if done >= target && submitted.load(Ordering::Relaxed) >= target {
            break t0.elapsed();
        }
        if options.soak.is_none() && t0.elapsed() > options.timeout {
            stop.cancel();
            bail!("the benchmark did not finish within {} s ({done}/{target} steps)", options.timeout.as_secs());
        }
        if scheduler_task.is_finished() || executor_tasks.iter().any(|t| t.is_finished()) {
            stop.cancel();
            bail!("a scheduler or executor loop stopped early ({done}/{target} steps)");
        }
    };
    bar.finish_and_clear();
    let cpu_after = cpu_seconds("self").unwrap_or(0.0);
    let load_after = load_average();
    let backends_after = backend_cpu(admin, name).await?;
    stop.cancel();
    let scheduler_counters = scheduler_task.await.context("the scheduler loop panicked")??;
    for task in executor_tasks {
        task.await.context("an executor loop panicked")??;
    }
    if let Some(task) = soak_task {
        task.await.context("the soak submitter panicked")??;
    }
    scheduler_pool.close().await;
    for p in &executor_pools {
        p.close().await;
    }
    if let Some(p) = &soak_pool {
        p.close().await;
    }
    // Exiting backends flush their statistics; give the last ones a moment.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let db_after = db_stats(admin, name).await?;

    let steps =
        if options.soak.is_some() { stats.deleted.load(Ordering::Relaxed) } else { submitted.load(Ordering::Relaxed) };
    let check = pool(scratch, 1).await?;
    let succeeded: i64 =
        sqlx::query_scalar("SELECT count(*) FROM steps WHERE status = 'succeeded'").fetch_one(&check).await?;
    if options.soak.is_none() && succeeded as u64 != steps {
        bail!("only {succeeded} of {steps} steps succeeded");
    }
    let (updates, hot_updates): (i64, i64) =
        sqlx::query_as("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'steps'")
            .fetch_one(&check)
            .await?;
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
    .fetch_all(&check)
    .await?;
    // Where the reads went: tuples read per step by relation (sequential scans of tables,
    // index scans of indexes), the largest first. Includes the submission's reads in bench
    // mode (small: inserts read little).
    let reads: Vec<(String, i64)> = sqlx::query_as(
        "SELECT relname || ' (seq)', seq_tup_read FROM pg_stat_user_tables WHERE seq_tup_read > 0
         UNION ALL
         SELECT indexrelname, idx_tup_read FROM pg_stat_user_indexes WHERE idx_tup_read > 0
         ORDER BY 2 DESC LIMIT 8",
    )
    .fetch_all(&check)
    .await?;
    // Soak: the latency of each minute, so that drift shows as latency too (at a steady
    // rate below capacity the throughput follows the submissions until the system falls behind).
    let mut latency_per_minute: Vec<MinuteLatency> = if options.soak.is_some() {
        sqlx::query_as(
            "SELECT floor(extract(epoch FROM started_at - $1) / 60)::int + 1 AS minute, count(*) AS claimed,
                    percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS p50,
                    percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) AS p99
             FROM (SELECT a.started_at, extract(epoch FROM a.started_at - greatest(s.created_at, $1)) * 1000 AS ms
                   FROM steps s JOIN step_attempts a ON a.step_id = s.id AND a.attempt = 1) x
             GROUP BY 1 ORDER BY 1",
        )
        .bind(t0_db)
        .fetch_all(&check)
        .await?
    } else {
        Vec::new()
    };
    // The few claims after the last full minute (the steps submitted as the soak ended).
    latency_per_minute.retain(|m| m.minute as usize <= per_minute.len());
    let enqueued = if options.rate.is_some() && options.soak.is_none() {
        let steps_of_runs: Vec<(uuid::Uuid, uuid::Uuid)> =
            sqlx::query_as("SELECT id, run_id FROM steps").fetch_all(&check).await?;
        let sent_at = sent_at.lock().map_err(|_| anyhow::anyhow!("the send log was poisoned"))?;
        let due_at = run_due_at.lock().map_err(|_| anyhow::anyhow!("the submission log was poisoned"))?;
        let ms: Vec<f64> = steps_of_runs
            .iter()
            .filter_map(|(step, run)| Some(sent_at.get(step)?.duration_since(*due_at.get(run)?).as_secs_f64() * 1000.0))
            .collect();
        Some(percentiles(ms))
    } else {
        None
    };
    check.close().await;
    let reads_per_step = reads
        .into_iter()
        .map(|(relation, n)| (relation, (n as f64 / steps.max(1) as f64 * 10.0).round() / 10.0))
        .collect();
    let pct = |i: usize| latency.get(i).copied().flatten().unwrap_or(f64::NAN);

    let postgres_s = {
        let mut sum = 0.0;
        let mut readable = true;
        for (pid, after) in &backends_after {
            match (after, backends_before.get(pid)) {
                (Some(a), Some(Some(b))) => sum += a - b,
                (Some(a), None) => sum += a,
                _ => readable = false,
            }
        }
        readable.then_some(sum)
    };
    let process_s = cpu_after - cpu_before;
    let per_step = |d: i64| d as f64 / steps.max(1) as f64;
    let commits = (db_after.xact_commit - db_before.xact_commit).max(0) as u64;
    let rollbacks = (db_after.xact_rollback - db_before.xact_rollback).max(0) as u64;
    let q = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 / steps.max(1) as f64;
    let queue_requests = QueueRequests {
        send: q(&stats.send_requests),
        receive: q(&stats.receive_requests),
        empty_receive: q(&stats.empty_receives),
        delete: q(&stats.delete_requests),
        change_visibility: q(&stats.change_visibility),
        total: q(&stats.send_requests)
            + q(&stats.receive_requests)
            + q(&stats.delete_requests)
            + q(&stats.change_visibility),
    };
    if let Some(memory) = &setup.memory
        && !memory.dead_letters().is_empty()
    {
        eprintln!("warning: {} messages ended on the in-memory DLQ", memory.dead_letters().len());
    }
    Ok(Report {
        mode: if options.soak.is_some() {
            "soak"
        } else if options.rate.is_some() {
            "rate"
        } else if options.dag {
            "dag"
        } else {
            "flat"
        },
        queue: if options.sqs { "sqs" } else { "memory" },
        steps,
        batch: options.batch,
        executors: options.executors,
        elapsed_s: elapsed.as_secs_f64(),
        steps_per_s: steps as f64 / elapsed.as_secs_f64(),
        commits,
        rollbacks,
        commits_per_step: commits as f64 / steps.max(1) as f64,
        statements_per_step: (commits + rollbacks) as f64 / steps.max(1) as f64,
        // Per reaper run: two reaper statements and the statistics check; plus each ANALYZE.
        scheduler_statements: scheduler_counters.lease_rounds
            + 3 * scheduler_counters.reaper_runs
            + scheduler_counters.statistics_refreshes,
        listen: options.listen,
        scheduler_wakeups: scheduler_counters.wakeups,
        tuples_per_step: Tuples {
            inserted: per_step(db_after.tup_inserted - db_before.tup_inserted),
            updated: per_step(db_after.tup_updated - db_before.tup_updated),
            deleted: per_step(db_after.tup_deleted - db_before.tup_deleted),
            returned: per_step(db_after.tup_returned - db_before.tup_returned),
            fetched: per_step(db_after.tup_fetched - db_before.tup_fetched),
        },
        reads_per_step,
        steps_hot_update_ratio: hot_updates as f64 / updates.max(1) as f64,
        rate: options.rate,
        latency_ms: Latency { p50: pct(0), p95: pct(1), p99: pct(2), max: pct(3) },
        due_to_enqueued_ms: enqueued,
        cpu: Cpu {
            process_s,
            postgres_backends_s: postgres_s,
            process_per_1000_steps_s: process_s * 1000.0 / steps.max(1) as f64,
            postgres_per_1000_steps_s: postgres_s.map(|s| s * 1000.0 / steps.max(1) as f64),
        },
        peak_rss_mb: peak_rss_mb(),
        queue_requests_per_step: queue_requests,
        aws_estimate: cost(&stats, steps),
        load_average_1m: [load_before, load_after],
        steps_per_minute: per_minute,
        latency_per_minute_ms: latency_per_minute,
    })
}

/// p50, p95, p99 and max of `values` (nearest rank).
pub(crate) fn percentiles(mut values: Vec<f64>) -> Latency {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| {
        if values.is_empty() {
            f64::NAN
        } else {
            values[((q * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1]
        }
    };
    Latency { p50: at(0.5), p95: at(0.95), p99: at(0.99), max: at(1.0) }
}

/// The scheduler's settings with the worker identity of executor `i`.
fn settings_for(settings: &Settings, i: usize) -> anyhow::Result<Settings> {
    let mut s = settings.clone();
    s.core.worker_id = format!("bench-executor-{i}-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    Ok(s)
}

fn print_report(r: &Report) {
    let opt = |v: Option<f64>| v.map_or("n/a".to_owned(), |v| format!("{v:.3}"));
    println!(
        "rara bench: {} steps ({}, {} queue), batch {}, {} executors",
        r.steps, r.mode, r.queue, r.batch, r.executors
    );
    println!("  throughput          {:.0} steps/s ({:.2} s)", r.steps_per_s, r.elapsed_s);
    println!(
        "  commits per step    {:.3} ({} commits, {} rollbacks; statements per step {:.3}, scheduler statements {})",
        r.commits_per_step, r.commits, r.rollbacks, r.statements_per_step, r.scheduler_statements
    );
    let t = &r.tuples_per_step;
    println!(
        "  tuples per step     inserted {:.2} updated {:.2} deleted {:.2} returned {:.1} fetched {:.1}",
        t.inserted, t.updated, t.deleted, t.returned, t.fetched
    );
    let reads: Vec<String> = r.reads_per_step.iter().map(|(rel, n)| format!("{rel} {n}")).collect();
    println!("  reads per step      {}", reads.join(", "));
    println!("  HOT updates (steps) {:.0} %", r.steps_hot_update_ratio * 100.0);
    let l = &r.latency_ms;
    println!("  due→claimed (ms)    p50 {:.1} p95 {:.1} p99 {:.1} max {:.1}", l.p50, l.p95, l.p99, l.max);
    if let Some(l) = &r.due_to_enqueued_ms {
        println!(
            "  due→enqueued (ms)   p50 {:.1} p95 {:.1} p99 {:.1} max {:.1} (scheduler {}, {} wake-ups)",
            l.p50,
            l.p95,
            l.p99,
            l.max,
            if r.listen { "listening" } else { "polling only" },
            r.scheduler_wakeups
        );
    }
    println!(
        "  CPU per 1000 steps  rara {:.3} s, Postgres backends {} s",
        r.cpu.process_per_1000_steps_s,
        opt(r.cpu.postgres_per_1000_steps_s)
    );
    println!("  peak RSS            {:.1} MiB", r.peak_rss_mb);
    let q = &r.queue_requests_per_step;
    println!(
        "  queue requests/step send {:.3} receive {:.3} (empty {:.3}) delete {:.3} visibility {:.3}",
        q.send, q.receive, q.empty_receive, q.delete, q.change_visibility
    );
    let a = &r.aws_estimate;
    println!(
        "  AWS per 1 M steps   ${:.3} (Lambda compute ${:.3} at {:.1} ms/batch, Lambda requests ${:.3}, SQS ${:.3}); scheduler ${:.2}/month; prices {}",
        a.total_usd_per_million_steps,
        a.lambda_compute_usd,
        a.mean_batch_ms,
        a.lambda_requests_usd,
        a.sqs_requests_usd,
        a.scheduler_usd_per_month,
        a.price_date
    );
    println!("  load average (1 m)  {:.2} before, {:.2} after", r.load_average_1m[0], r.load_average_1m[1]);
    if !r.steps_per_minute.is_empty() {
        let minutes: Vec<String> = r.steps_per_minute.iter().map(|n| format!("{:.0}", *n as f64 / 60.0)).collect();
        println!("  steps/s per minute  {}", minutes.join(", "));
        if let (Some(first), Some(last)) = (r.steps_per_minute.first(), r.steps_per_minute.last()) {
            println!("  last / first minute {:.2}", *last as f64 / (*first).max(1) as f64);
        }
    }
    for m in &r.latency_per_minute_ms {
        let ms = |v: Option<f64>| v.map_or("n/a".to_owned(), |v| format!("{v:.1}"));
        println!(
            "  minute {:>3}          {} claimed, due→claimed p50 {} p99 {} ms",
            m.minute,
            m.claimed,
            ms(m.p50),
            ms(m.p99)
        );
    }
}
