//! The throughput modes (`flat`, `dag`, `rate`, `soak`): noop steps drained by the handler
//! code of the two Lambdas, `Scheduler::run` and K executor loops (`run_executor`, each with
//! its own 2-connection pool, like one Lambda container), receiving batches from an
//! in-memory queue with SQS semantics or SQS itself (`--queue sqs`).
//!
//! Measured from the moment the loops start to the moment the last step's message is
//! deleted (or the soak time is over); [`crate::measure`] reads the rest afterwards, except
//! what a soak reads at the end of each minute ([`crate::minutes`]). In a soak the scheduler
//! runs as back-to-back invocations of one minute each, so that its counters (the runs the
//! retention deleted) can be read every minute.
//!
//! # Layout
//!
//! - `throughput.rs`: the run (setup, loops, wait, measure) and what `backlog` reuses: the
//!   settings, the submission, the executor loops.
//! - `throughput/setup.rs`: the queue under test and the connection pools.
//! - `throughput/loops.rs`: the loops while they run, and how they stop.
//! - `throughput/wait.rs`: waiting for the end, or for a soak's minutes.

mod loops;
mod setup;
mod wait;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context;
use rara_domain::workflow::WorkflowDefinition;
use rara_platform::runner::{RunnerOptions, run_executor};
use rara_queue::Queue;
use rara_runtime::executor::BatchExecutor;
use rara_runtime::metrics::Counters;
use rara_runtime::settings::Settings;
use rara_store::Store;
use rara_testkit::scratch::ScratchDb;
use sqlx::PgPool;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use self::loops::Loops;
pub use self::setup::{Pools, QueueSetup};
use self::wait::{soak, wait};
use crate::counted::{Counted, QueueStats};
use crate::measure::{After, Before};
use crate::options::{Mode, Options, QueueKind};
use crate::report::Report;
use crate::system::{self, pool};
use crate::workload;

/// Connections per executor loop and for the scheduler: what one Lambda container holds.
pub const POOL_CONNECTIONS: u32 = 2;

/// Runs one throughput benchmark on the (migrated) scratch database.
pub async fn run(options: &Options, admin: &PgPool, scratch: &ScratchDb) -> anyhow::Result<Report> {
    let probe = settings("bench", "memory://rara-bench", None, &[])?;
    let setup = QueueSetup::new(options.queue, &probe).await?;
    let result = drive(options, admin, scratch, &setup).await;
    setup.delete_sqs_queues().await;
    result
}

async fn drive(options: &Options, admin: &PgPool, scratch: &ScratchDb, setup: &QueueSetup) -> anyhow::Result<Report> {
    let mut settings = settings("bench-scheduler", &setup.url, setup.dlq_url.as_deref(), &[])?;
    settings.scheduler_poll = options.poll;
    settings.scheduler_listen = options.listen;
    if let Some(retention) = options.mode.prune_after() {
        settings.retention = Some(retention);
    }
    let settings = Arc::new(settings);

    // An experiment on the schema (`--setup-sql`), before anything is submitted.
    if let Some(sql) = &options.setup_sql {
        let setup_pool = pool(&scratch.connect_options(), 1).await?;
        sqlx::raw_sql(sql).execute(&setup_pool).await.context("the --setup-sql file failed")?;
        setup_pool.close().await;
    }
    // The steps, before the measurement.
    let preloaded = preload(options, scratch, &settings).await?;
    let pools = Pools::open(scratch, options.executors, !options.mode.preloaded()).await?;
    // Idle backends flush their statistics within a second.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let registry = crate::workload::registry(&settings).await?;

    let before = Before::take(admin, &scratch.name).await?;
    let loops = Loops::start(options, &settings, setup, &pools, registry, preloaded, before.t0);
    let target = if options.mode.preloaded() { preloaded } else { options.steps as u64 };
    let waited = match options.mode.soak() {
        Some(minutes) => soak(&loops, minutes, &before, scratch).await,
        None => wait(options, &loops, before.t0, target).await,
    };
    let finished = match waited {
        Ok(finished) => finished,
        Err(e) => {
            loops.stop.cancel();
            return Err(e);
        }
    };
    let mut after = After::take(admin, &scratch.name, finished).await?;
    let submitted = loops.submitted.load(Ordering::Relaxed);
    let (stats, sent_at, run_due_at) = (loops.stats.clone(), loops.sent_at.clone(), loops.run_due_at.clone());
    let scheduler_counters = loops.stop().await?;
    pools.close().await;
    // Exiting backends flush their statistics; give the last ones a moment.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    after.db = system::db_stats(admin, &scratch.name).await?;
    if before.statements {
        after.statements = system::top_statements(admin, &scratch.name, 6).await?;
    }

    if let Some(memory) = &setup.memory
        && !memory.dead_letters().is_empty()
    {
        eprintln!("warning: {} messages ended on the in-memory DLQ", memory.dead_letters().len());
    }
    let logs = crate::measure::Logs { sent_at: &sent_at, run_due_at: &run_due_at };
    crate::measure::report(options, scratch, &stats, &before, &after, &scheduler_counters, submitted, logs).await
}

/// Submits every step of a preloaded mode (`flat`, `dag`) and returns how many; 0 otherwise.
async fn preload(options: &Options, scratch: &ScratchDb, settings: &Settings) -> anyhow::Result<u64> {
    let runs = match options.mode {
        Mode::Flat => workload::flat(options.steps, options.operation),
        Mode::Dag => workload::dag(options.steps),
        Mode::Rate(_) | Mode::Soak { .. } => return Ok(0),
    };
    submit(scratch, settings, &runs).await
}

/// Submits `runs` through a pool of its own (closed afterwards) and returns how many steps they hold.
pub async fn submit(scratch: &ScratchDb, settings: &Settings, runs: &[WorkflowDefinition]) -> anyhow::Result<u64> {
    let setup_pool = pool(&scratch.connect_options(), 2).await.context("cannot connect to the scratch database")?;
    let total = workload::submit_all(&Store::new(setup_pool.clone()), settings, runs, None).await;
    setup_pool.close().await;
    total
}

/// Settings for `role` on the queue under test: `overrides` first, then the environment.
pub fn settings(
    role: &str,
    queue_url: &str,
    dlq_url: Option<&str>,
    overrides: &[(&str, String)],
) -> anyhow::Result<Settings> {
    let vars: HashMap<&str, String> = [
        ("RARA_QUEUE_URL", queue_url.to_owned()),
        ("RARA_DLQ_URL", dlq_url.unwrap_or("memory://rara-bench-dlq").to_owned()),
        ("RARA_LOG", "warn".to_owned()),
    ]
    .into_iter()
    .chain(overrides.iter().cloned())
    .collect();
    let env = |k: &str| std::env::var(k).ok();
    Ok(Settings::from_lookup(role, |k| vars.get(k).cloned().or_else(|| env(k)))?)
}

/// The scheduler's settings with the worker identity of executor `i`.
fn settings_for(settings: &Settings, i: usize) -> Settings {
    let mut s = settings.clone();
    s.core.worker_id = format!("bench-executor-{i}-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    s
}

/// How an executor loop polls: batches of `batch` (gathered within `window` above 10), with
/// the function timeout of `settings`.
pub fn runner_options(batch: u32, window: Duration, queue: QueueKind, settings: &Settings) -> RunnerOptions {
    RunnerOptions {
        batch_size: batch,
        batching_window: if batch > 10 { window } else { Duration::ZERO },
        // SQS long-polls in whole seconds; the in-memory queue wakes on arrival.
        wait: match queue {
            QueueKind::Sqs => Duration::from_secs(1),
            QueueKind::Memory => Duration::from_millis(200),
        },
        batch_timeout: settings.core.function_timeout,
        margin: settings.deadline_margin,
        until_idle: None,
    }
}

/// One executor loop (`run_executor`, the executor Lambda's handler code) per executor pool,
/// each with its own worker identity and a queue counted into `stats`, until `stop`.
pub fn spawn_executors(
    settings: &Settings,
    setup: &QueueSetup,
    pools: &Pools,
    registry: &Arc<rara_domain::registry::Registry>,
    runner: &RunnerOptions,
    stats: &Arc<QueueStats>,
    stop: &CancellationToken,
) -> Vec<JoinHandle<anyhow::Result<Counters>>> {
    (pools.executors.iter().enumerate())
        .map(|(i, executor_pool)| {
            let queue: Arc<dyn Queue> = Counted::new(setup.queue.clone(), stats.clone());
            let store = Store::new(executor_pool.clone());
            let executor = BatchExecutor::new(store, queue.clone(), registry.clone(), &settings_for(settings, i));
            let (stop, runner) = (stop.clone(), runner.clone());
            tokio::spawn(async move { Ok(run_executor(&executor, queue, &runner, stop).await?) })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_executor_has_its_own_identity() {
        let base = settings("bench", "memory://rara-bench", None, &[]).unwrap();
        let (a, b) = (settings_for(&base, 0), settings_for(&base, 1));
        assert!(a.core.worker_id.starts_with("bench-executor-0-"));
        assert_ne!(a.core.worker_id, b.core.worker_id);
    }
}
