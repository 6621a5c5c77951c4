//! The `backlog` mode: lease churn behind a queue that backs up well past an execution's lease.
//!
//! `--steps` `sleep` steps are submitted, then the scheduler (`Scheduler::run`) leases them
//! all at once and sends one message each, while `--executors` executor loops of `--batch`
//! messages (the capacity: executors × batch steps at a time) drain them. The execution lease
//! (`--lease-seconds`, which also sets the visibility and function timeouts) is much shorter
//! than the time the last messages wait. Counted: messages the scheduler sent and executors
//! received, stale deliveries, steps the reaper leased again. `RARA_DELIVERY_TIMEOUT_SECONDS`
//! (or `--delivery-timeout-seconds`) set equal to the lease approximates the earlier
//! behaviour, when a step was leased for the execution lease while its message waited
//! (journal: `docs/benchmarks/journal/2026-12-03-messages-per-step-under-a-backlog.md`).
//!
//! Measured from the loops' start to the last step's success; then the executors get up to
//! [`DRAIN_LIMIT`] to receive what is left on the queue (stale copies), which counts too.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use rara_runtime::metrics::Counters;
use rara_runtime::scheduler::Scheduler;
use rara_runtime::settings::Settings;
use rara_store::Store;
use rara_testkit::scratch::ScratchDb;
use serde::Serialize;
use sqlx::PgPool;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::counted::{Counted, QueueStats};
use crate::options::QueueKind;
use crate::system;
use crate::throughput::{self, Pools, QueueSetup};
use crate::workload;

/// Kept free at the end of a batch to record outcomes (short: the function timeout is the lease).
const DEADLINE_MARGIN_MS: u64 = 500;
/// How often the reaper looks for expired leases (the default, 5 s, would hide churn of a 3 s lease).
const REAP_INTERVAL_MS: u64 = 500;
/// The scheduler's longest pause between passes.
const SCHEDULER_POLL_MS: u64 = 100;
/// How long the executors may take, after the last step succeeded, to empty the queue.
const DRAIN_LIMIT: Duration = Duration::from_secs(30);
/// Messages received per step that the issue asks for at most.
pub const TARGET_RECEIVED_PER_STEP: f64 = 1.1;

/// What a backlog run was asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    pub steps: usize,
    /// How long each `sleep` step sleeps, in seconds.
    pub sleep_seconds: f64,
    pub executors: u32,
    /// Messages per executor batch (one receive: at most 10).
    pub batch: u32,
    /// `RARA_LEASE_SECONDS`; also the visibility and function timeouts.
    pub lease_seconds: u64,
    /// `RARA_DELIVERY_TIMEOUT_SECONDS`, when given on the command line (else the environment's,
    /// else rara's default: visibility × `maxReceiveCount`).
    pub delivery_timeout_seconds: Option<u64>,
    pub queue: QueueKind,
    pub timeout: Duration,
}

impl Options {
    /// Steps running at once: every executor's batch.
    pub fn capacity(&self) -> u64 {
        u64::from(self.executors) * u64::from(self.batch)
    }

    /// The settings this mode fixes; the rest come from the environment.
    fn overrides(&self) -> Vec<(&'static str, String)> {
        let lease = self.lease_seconds.to_string();
        let mut vars = vec![
            ("RARA_LEASE_SECONDS", lease.clone()),
            ("RARA_HEARTBEAT_SECONDS", (self.lease_seconds / 3).max(1).to_string()),
            ("RARA_VISIBILITY_TIMEOUT_SECONDS", lease.clone()),
            ("RARA_FUNCTION_TIMEOUT_SECONDS", lease),
            ("RARA_DEADLINE_MARGIN_MS", DEADLINE_MARGIN_MS.to_string()),
            ("RARA_REAP_INTERVAL_MS", REAP_INTERVAL_MS.to_string()),
            ("RARA_SCHEDULER_POLL_MS", SCHEDULER_POLL_MS.to_string()),
        ];
        if let Some(delivery) = self.delivery_timeout_seconds {
            vars.push(("RARA_DELIVERY_TIMEOUT_SECONDS", delivery.to_string()));
        }
        vars
    }
}

/// The settings the run used.
#[derive(Debug, Serialize)]
pub struct RunSettings {
    pub sleep_s: f64,
    pub executors: u32,
    pub batch: u32,
    /// Steps running at once (executors × batch).
    pub capacity: u64,
    pub lease_s: u64,
    pub visibility_timeout_s: u64,
    pub delivery_timeout_s: u64,
    pub heartbeat_s: u64,
    pub reap_interval_ms: u64,
}

/// The report of a backlog run (`--json` prints it as one line).
#[derive(Debug, Serialize)]
pub struct Report {
    pub mode: &'static str,
    pub queue: &'static str,
    pub steps: u64,
    pub settings: RunSettings,
    /// Messages the scheduler sent.
    pub sent: u64,
    /// Messages the executors received (a message that came back counts again).
    pub received: u64,
    pub sent_per_step: f64,
    pub received_per_step: f64,
    /// Whether `received_per_step` ≤ [`TARGET_RECEIVED_PER_STEP`].
    pub target_met: bool,
    /// Deliveries whose lease token was no longer current: acknowledged, nothing ran.
    pub stale: u64,
    pub claimed: u64,
    pub succeeded: u64,
    pub dead_lettered: u64,
    /// Leases the scheduler took (steps + re-leases).
    pub leased: u64,
    /// Leases the reaper gave back (the scheduler's `Reaped`: never-claimed steps released
    /// and running steps taken over), each leased again with a new message.
    pub reaped: u64,
    /// Attempts the reaper ended (`step_attempts.outcome = 'lease_expired'`): running steps
    /// taken from their executor.
    pub attempts_taken_over: u64,
    /// Most messages on the queue at once (sent − deleted, in flight included), sampled every 100 ms.
    pub queue_depth_peak: u64,
    /// `queue_depth_peak` / capacity.
    pub backlog_factor: f64,
    /// From the loops' start to the last step's success.
    pub elapsed_s: f64,
    /// From the loops' start until the queue was empty (or [`DRAIN_LIMIT`] after the last success).
    pub drained_s: f64,
    /// Messages still on the queue at the end.
    pub left_on_queue: u64,
    pub load_average_1m: [f64; 2],
}

/// `n` per step; 0 steps gives 0.
fn per_step(n: u64, steps: u64) -> f64 {
    if steps == 0 { 0.0 } else { n as f64 / steps as f64 }
}

/// Runs the backlog benchmark on the (migrated) scratch database.
pub async fn run(options: &Options, scratch: &ScratchDb) -> anyhow::Result<Report> {
    let overrides = options.overrides();
    let probe = throughput::settings("bench", "memory://rara-bench", None, &overrides)?;
    if options.sleep_seconds >= probe.core.default_step_timeout.as_secs_f64() {
        bail!(
            "--sleep-seconds ({}) must be shorter than the step timeout ({} s: the lease {} s less a {} ms margin, in whole seconds)",
            options.sleep_seconds,
            probe.core.default_step_timeout.as_secs(),
            options.lease_seconds,
            DEADLINE_MARGIN_MS
        );
    }
    let setup = QueueSetup::new(options.queue, &probe).await?;
    let result = drive(options, scratch, &setup, &overrides).await;
    setup.delete_sqs_queues().await;
    result
}

async fn drive(
    options: &Options,
    scratch: &ScratchDb,
    setup: &QueueSetup,
    overrides: &[(&str, String)],
) -> anyhow::Result<Report> {
    let settings = Arc::new(throughput::settings("bench-scheduler", &setup.url, setup.dlq_url.as_deref(), overrides)?);
    let steps =
        throughput::submit(scratch, &settings, &workload::sleeping(options.steps, options.sleep_seconds)).await?;
    // The submitter's pool watches the steps.
    let pools = Pools::open(scratch, options.executors, true).await?;
    let result = measure(options, &settings, setup, &pools, steps).await;
    pools.close().await;
    result
}

async fn measure(
    options: &Options,
    settings: &Arc<Settings>,
    setup: &QueueSetup,
    pools: &Pools,
    steps: u64,
) -> anyhow::Result<Report> {
    let watcher = pools.submitter.as_ref().context("no pool to watch the steps")?;
    let registry = crate::workload::registry(settings).await?;
    let (stop, stats) = (CancellationToken::new(), Arc::new(QueueStats::default()));
    let load_before = system::load_average();

    let scheduler = Scheduler::new(
        Store::new(pools.scheduler.clone()),
        Counted::new(setup.queue.clone(), stats.clone()),
        settings.clone(),
    );
    let t0 = Instant::now();
    let scheduler = {
        let stop = stop.clone();
        tokio::spawn(async move { scheduler.run(None, stop).await })
    };
    let runner = throughput::runner_options(options.batch, Duration::ZERO, options.queue, settings);
    let executors = throughput::spawn_executors(settings, setup, pools, &registry, &runner, &stats, &stop);
    let broken = || scheduler.is_finished() || executors.iter().any(|t| t.is_finished());
    let watched = watch(options, steps, &stats, watcher, t0, broken).await;

    stop.cancel();
    let scheduler_counters = scheduler.await.context("the scheduler loop panicked")??;
    let mut executed = Counters::default();
    for task in executors {
        executed += task.await.context("an executor loop panicked")??;
    }
    let watched = watched?;
    let attempts_taken_over: i64 =
        sqlx::query_scalar("SELECT count(*) FROM step_attempts WHERE outcome = 'lease_expired'")
            .fetch_one(watcher)
            .await?;

    let sent = stats.sent.load(Ordering::Relaxed);
    let received = stats.received.load(Ordering::Relaxed);
    let capacity = options.capacity();
    let received_per_step = per_step(received, steps);
    Ok(Report {
        mode: "backlog",
        queue: options.queue.name(),
        steps,
        settings: RunSettings {
            sleep_s: options.sleep_seconds,
            executors: options.executors,
            batch: options.batch,
            capacity,
            lease_s: settings.core.lease_duration.as_secs(),
            visibility_timeout_s: settings.core.visibility_timeout.as_secs(),
            delivery_timeout_s: settings.delivery_timeout.as_secs(),
            heartbeat_s: settings.core.heartbeat_interval.as_secs(),
            reap_interval_ms: settings.reap_interval.as_millis() as u64,
        },
        sent,
        received,
        sent_per_step: per_step(sent, steps),
        received_per_step,
        target_met: received_per_step <= TARGET_RECEIVED_PER_STEP,
        stale: executed.stale,
        claimed: executed.claimed,
        succeeded: executed.succeeded,
        dead_lettered: executed.dead_lettered,
        leased: scheduler_counters.leased,
        reaped: scheduler_counters.reaped,
        attempts_taken_over: attempts_taken_over.max(0) as u64,
        queue_depth_peak: watched.depth_peak,
        backlog_factor: per_step(watched.depth_peak, capacity),
        elapsed_s: watched.finished.as_secs_f64(),
        drained_s: watched.drained.as_secs_f64(),
        left_on_queue: watched.left,
        load_average_1m: [load_before, system::load_average()],
    })
}

/// What [`watch`] saw.
#[derive(Debug)]
struct Watched {
    /// When the last step succeeded, and when the queue was empty (or the drain gave up).
    finished: Duration,
    drained: Duration,
    depth_peak: u64,
    /// Messages on the queue when the drain ended.
    left: u64,
}

/// Samples the queue depth and watches the steps until every one succeeded and the queue is
/// empty (or [`DRAIN_LIMIT`] passed after the last success).
async fn watch(
    options: &Options,
    steps: u64,
    stats: &QueueStats,
    watcher: &PgPool,
    t0: Instant,
    broken: impl Fn() -> bool,
) -> anyhow::Result<Watched> {
    let bar = ProgressBar::new(steps);
    bar.set_style(
        ProgressStyle::with_template("{elapsed:>4} [{bar:40}] {pos}/{len} steps {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let (mut depth_peak, mut finished) = (0, None);
    let watched = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let depth = stats.sent.load(Ordering::Relaxed).saturating_sub(stats.deleted.load(Ordering::Relaxed));
        depth_peak = depth_peak.max(depth);
        let (succeeded, ended): (i64, i64) = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE status = 'succeeded'), \
                    count(*) FILTER (WHERE status IN ('failed', 'cancelled', 'skipped')) FROM steps",
        )
        .fetch_one(watcher)
        .await?;
        bar.set_position(succeeded.max(0) as u64);
        bar.set_message(format!("{depth} messages on the queue"));
        if ended > 0 {
            bail!("{ended} steps did not succeed ({succeeded}/{steps} succeeded)");
        }
        match finished {
            None if succeeded.max(0) as u64 >= steps => finished = Some(t0.elapsed()),
            None if t0.elapsed() > options.timeout => {
                bail!("the benchmark did not finish within {} s ({succeeded}/{steps} steps)", options.timeout.as_secs())
            }
            _ => {}
        }
        if let Some(at) = finished
            && (depth == 0 || t0.elapsed() > at + DRAIN_LIMIT)
        {
            break Watched { finished: at, drained: t0.elapsed(), depth_peak, left: depth };
        }
        if broken() {
            bail!("a scheduler or executor loop stopped early ({succeeded}/{steps} steps)");
        }
    };
    bar.finish_and_clear();
    Ok(watched)
}

pub fn print(r: &Report) {
    let s = &r.settings;
    println!(
        "rara-bench backlog: {} steps of sleep {} s ({} queue), {} executors × batch {} = capacity {}",
        r.steps, s.sleep_s, r.queue, s.executors, s.batch, s.capacity
    );
    println!(
        "  settings            lease {} s, visibility {} s, delivery timeout {} s, heartbeat {} s, reaper every {} ms",
        s.lease_s, s.visibility_timeout_s, s.delivery_timeout_s, s.heartbeat_s, s.reap_interval_ms
    );
    println!("  backlog             queue depth peak {} = {:.1} × capacity", r.queue_depth_peak, r.backlog_factor);
    println!(
        "  messages            sent {} ({:.2} per step), received {} ({:.2} per step; target ≤ {TARGET_RECEIVED_PER_STEP}: {})",
        r.sent,
        r.sent_per_step,
        r.received,
        r.received_per_step,
        if r.target_met { "met" } else { "NOT met" }
    );
    println!(
        "  deliveries          {} claimed, {} stale, {} succeeded, {} dead-lettered",
        r.claimed, r.stale, r.succeeded, r.dead_lettered
    );
    println!(
        "  reaper              {} leases given back and leased again ({} running attempts taken over); {} leases in all",
        r.reaped, r.attempts_taken_over, r.leased
    );
    println!(
        "  wall time           {:.1} s to the last success, {:.1} s until the queue was empty ({} left)",
        r.elapsed_s, r.drained_s, r.left_on_queue
    );
    println!("  load average (1 m)  {:.2} before, {:.2} after", r.load_average_1m[0], r.load_average_1m[1]);
}

#[cfg(test)]
mod tests;
