//! The throughput modes (`flat`, `dag`, `rate`, `soak`): noop steps drained by the handler
//! code of the two Lambdas, `Scheduler::run` and K executor loops (`run_executor`, each with
//! its own 2-connection pool, like one Lambda container), receiving batches from an
//! in-memory queue with SQS semantics or SQS itself (`--queue sqs`).
//!
//! Measured from the moment the loops start to the moment the last step's message is
//! deleted (or the soak time is over); [`crate::measure`] reads the rest afterwards.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use rara_domain::workflow::WorkflowDefinition;
use rara_queue::Queue;
use rara_queue::memory::MemoryQueue;
use rara_queue::sqs::SqsQueue;
use rara_runtime::batch::BatchExecutor;
use rara_runtime::metrics::Counters;
use rara_runtime::runner::{RunnerOptions, run_executor};
use rara_runtime::scheduler::Scheduler;
use rara_runtime::settings::Settings;
use rara_store::Store;
use rara_testkit::scratch::ScratchDb;
use sqlx::PgPool;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::counted::{Counted, Instants, QueueStats};
use crate::measure::{After, Before};
use crate::report::Report;
use crate::system::{self, pool};
use crate::workload::{self, Submitter};
use crate::{Mode, Options, QueueKind};

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
    let settings = Arc::new(settings);

    // The steps, before the measurement.
    let preloaded = preload(options, scratch, &settings).await?;
    let pools = Pools::open(scratch, options.executors, !options.mode.preloaded()).await?;
    // Idle backends flush their statistics within a second.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let registry = Arc::new(rara_runtime::wiring::standard_registry(&settings).await?);

    let before = Before::take(admin, &scratch.name).await?;
    let loops = Loops::start(options, &settings, setup, &pools, registry, preloaded);
    let target = if options.mode.preloaded() { preloaded } else { options.steps as u64 };
    let finished = match wait(options, &loops, before.t0, target).await {
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
        Mode::Flat => workload::flat(options.steps),
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

/// The queue under test: in memory, or a fresh SQS queue pair.
pub struct QueueSetup {
    pub queue: Arc<dyn Queue>,
    pub url: String,
    pub dlq_url: Option<String>,
    pub memory: Option<Arc<MemoryQueue>>,
    /// The SQS queue and the URLs to delete at the end.
    sqs: Option<(Arc<SqsQueue>, [String; 2])>,
}

impl QueueSetup {
    /// A queue with `probe`'s visibility timeout and `maxReceiveCount`.
    pub async fn new(kind: QueueKind, probe: &Settings) -> anyhow::Result<Self> {
        let (visibility, max_receive) = (probe.core.visibility_timeout, probe.core.max_receive_count);
        if kind == QueueKind::Memory {
            let memory = Arc::new(MemoryQueue::new(visibility, max_receive));
            return Ok(QueueSetup {
                queue: memory.clone(),
                url: "memory://rara-bench".into(),
                dlq_url: None,
                memory: Some(memory),
                sqs: None,
            });
        }
        let client = SqsQueue::client_from_env().await;
        let name = format!("rara-bench-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let pair = rara_queue::sqs::create_queue_pair(&client, &name, visibility, max_receive)
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

    pub async fn delete_sqs_queues(&self) {
        if let Some((queue, urls)) = &self.sqs {
            for url in urls {
                let _ = queue.client().delete_queue().queue_url(url).send().await;
            }
        }
    }
}

/// One pool per "container": the scheduler's, one per executor loop, and the submitter's.
pub struct Pools {
    pub scheduler: PgPool,
    pub executors: Vec<PgPool>,
    pub submitter: Option<PgPool>,
}

impl Pools {
    pub async fn open(scratch: &ScratchDb, executors: u32, with_submitter: bool) -> anyhow::Result<Self> {
        let db = scratch.connect_options();
        let scheduler = pool(&db, POOL_CONNECTIONS).await?;
        let mut executor_pools = Vec::new();
        for _ in 0..executors {
            executor_pools.push(pool(&db, POOL_CONNECTIONS).await?);
        }
        let submitter = if with_submitter { Some(pool(&db, 1).await?) } else { None };
        Ok(Pools { scheduler, executors: executor_pools, submitter })
    }

    pub async fn close(&self) {
        self.scheduler.close().await;
        for p in &self.executors {
            p.close().await;
        }
        if let Some(p) = &self.submitter {
            p.close().await;
        }
    }
}

/// The running loops and what they share.
struct Loops {
    stop: CancellationToken,
    stats: Arc<QueueStats>,
    submitted: Arc<AtomicU64>,
    /// `rate`: when each step's message was sent, and when each run's submission started.
    sent_at: Arc<Instants>,
    run_due_at: Arc<Instants>,
    scheduler: JoinHandle<anyhow::Result<Counters>>,
    executors: Vec<JoinHandle<anyhow::Result<Counters>>>,
    submitter: Option<JoinHandle<anyhow::Result<()>>>,
}

impl Loops {
    fn start(
        options: &Options,
        settings: &Arc<Settings>,
        setup: &QueueSetup,
        pools: &Pools,
        registry: Arc<rara_domain::registry::Registry>,
        preloaded: u64,
    ) -> Self {
        let stop = CancellationToken::new();
        let stats = Arc::new(QueueStats::default());
        let (sent_at, run_due_at) = (Arc::new(Instants::default()), Arc::new(Instants::default()));
        // Due-to-enqueued is recorded per step in memory: for the bounded `rate` runs only.
        let scheduler_queue = match options.mode {
            Mode::Rate(_) => Counted::recording(setup.queue.clone(), stats.clone(), sent_at.clone()),
            _ => Counted::new(setup.queue.clone(), stats.clone()),
        };
        let scheduler = Scheduler::new(Store::new(pools.scheduler.clone()), scheduler_queue, settings.clone());
        let scheduler = {
            let stop = stop.clone();
            tokio::spawn(async move { Ok(scheduler.run(None, stop).await?) })
        };
        let runner = runner_options(options.batch, options.batching_window, options.queue, settings);
        let executors = spawn_executors(settings, setup, pools, &registry, &runner, &stats, &stop);
        let submitted = Arc::new(AtomicU64::new(preloaded));
        let submitter = pools.submitter.as_ref().map(|p| {
            let submitter = Submitter {
                store: Store::new(p.clone()),
                settings: settings.clone(),
                rate: options.mode.rate(),
                // A soak at a steady rate submits until the time is over.
                target: if options.mode.soak().is_some() { u64::MAX } else { options.steps as u64 },
                submitted: submitted.clone(),
                stats: stats.clone(),
                due_at: run_due_at.clone(),
                stop: stop.clone(),
            };
            tokio::spawn(submitter.run())
        });
        Loops { stop, stats, submitted, sent_at, run_due_at, scheduler, executors, submitter }
    }

    /// Whether a loop ended before it was told to.
    fn broken(&self) -> bool {
        self.scheduler.is_finished() || self.executors.iter().any(|t| t.is_finished())
    }

    /// Stops the loops and returns the scheduler's counters.
    async fn stop(self) -> anyhow::Result<Counters> {
        self.stop.cancel();
        let counters = self.scheduler.await.context("the scheduler loop panicked")??;
        for task in self.executors {
            task.await.context("an executor loop panicked")??;
        }
        if let Some(task) = self.submitter {
            task.await.context("the submitter panicked")??;
        }
        Ok(counters)
    }
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

/// How the loops ended: the measured time, and the steps of each minute of a soak.
#[derive(Debug)]
pub struct Finished {
    pub elapsed: Duration,
    /// Steps finished in each minute (the last one scaled to 60 s if it was cut short).
    pub per_minute: Vec<u64>,
}

/// Shows progress until every step's message is deleted (or the soak time is over).
async fn wait(options: &Options, loops: &Loops, t0: Instant, target: u64) -> anyhow::Result<Finished> {
    let bar = match options.mode.soak() {
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
        let done = loops.stats.deleted.load(Ordering::Relaxed);
        bar.set_position(done);
        if let Some(soak) = options.mode.soak() {
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
        } else if done >= target && loops.submitted.load(Ordering::Relaxed) >= target {
            break t0.elapsed();
        } else if t0.elapsed() > options.timeout {
            bail!("the benchmark did not finish within {} s ({done}/{target} steps)", options.timeout.as_secs());
        }
        if loops.broken() {
            bail!("a scheduler or executor loop stopped early ({done}/{target} steps)");
        }
    };
    bar.finish_and_clear();
    Ok(Finished { elapsed, per_minute })
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
