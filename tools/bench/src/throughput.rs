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

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use rara_domain::workflow::WorkflowDefinition;
use rara_platform::runner::{RunnerOptions, run_executor};
use rara_queue::Queue;
use rara_queue::memory::MemoryQueue;
use rara_queue::sqs::SqsQueue;
use rara_runtime::executor::BatchExecutor;
use rara_runtime::metrics::Counters;
use rara_runtime::scheduler::Scheduler;
use rara_runtime::settings::Settings;
use rara_store::Store;
use rara_testkit::scratch::ScratchDb;
use sqlx::PgPool;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::counted::{Counted, Instants, QueueStats};
use crate::measure::{After, Before};
use crate::minutes::{MINUTE, READ_DELAY, Readings};
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
    let registry = Arc::new(rara_runtime::registry::standard_registry(&settings).await?);

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
    /// Soak: the last minute whose scheduler invocation ended, and the counters summed so far.
    scheduler_minutes: Option<watch::Receiver<(u32, Counters)>>,
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
        t0: Instant,
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
        let (scheduler, scheduler_minutes) = match options.mode.soak() {
            Some(_) => {
                let (minutes, receiver) = watch::channel((0, Counters::default()));
                (tokio::spawn(minutely(scheduler, t0, stop.clone(), minutes)), Some(receiver))
            }
            None => {
                let stop = stop.clone();
                (tokio::spawn(async move { Ok(scheduler.run(None, stop).await?) }), None)
            }
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
        Loops { stop, stats, submitted, sent_at, run_due_at, scheduler, scheduler_minutes, executors, submitter }
    }

    /// Soak: the scheduler's counters summed over its invocations up to the end of minute
    /// `minute`, once the invocation ending then has returned; after [`READ_DELAY`] more (a
    /// pass goes on while full lease batches are due), over those that have returned.
    async fn scheduler_counters(&self, minute: u32) -> anyhow::Result<Counters> {
        let Some(minutes) = &self.scheduler_minutes else { bail!("the scheduler does not run by the minute") };
        let mut waiting = minutes.clone();
        match tokio::time::timeout(READ_DELAY, waiting.wait_for(|(ended, _)| *ended >= minute)).await {
            Ok(counters) => Ok(counters.context("the scheduler loop stopped early")?.1),
            Err(_) => {
                let (ended, counters) = *minutes.borrow();
                eprintln!("warning: minute {minute}: the scheduler's counters are those up to minute {ended}");
                Ok(counters)
            }
        }
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

/// Soak: the scheduler loop as back-to-back invocations (`Scheduler::run` with a budget, the
/// call of the scheduler Lambda), each ending at the end of a minute after `t0`, publishing
/// after each its minute and the counters summed so far; until `stop`. Returns the sum.
async fn minutely(
    scheduler: Scheduler,
    t0: Instant,
    stop: CancellationToken,
    minutes: watch::Sender<(u32, Counters)>,
) -> anyhow::Result<Counters> {
    let mut total = Counters::default();
    let mut minute = 0;
    while !stop.is_cancelled() {
        minute += 1;
        let budget = (t0 + MINUTE * minute).saturating_duration_since(Instant::now());
        total += scheduler.run(Some(budget), stop.clone()).await?;
        minutes.send_replace((minute, total));
    }
    Ok(total)
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

/// How the loops ended: the measured time, and what each minute of a soak read.
#[derive(Debug)]
pub struct Finished {
    pub elapsed: Duration,
    /// Soak: steps finished in each minute.
    pub per_minute: Vec<u64>,
    /// Soak: latency and history of each minute.
    pub minutes: Readings,
}

fn progress_bar(length: Option<u64>) -> ProgressBar {
    let bar = match length {
        Some(length) => ProgressBar::new(length),
        None => ProgressBar::new_spinner(),
    };
    bar.set_style(
        ProgressStyle::with_template("{elapsed:>4} [{bar:40}] {pos}/{len} steps {per_sec} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}

/// Shows progress until every step's message is deleted.
async fn wait(options: &Options, loops: &Loops, t0: Instant, target: u64) -> anyhow::Result<Finished> {
    let bar = progress_bar(Some(target));
    let elapsed = loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let done = loops.stats.steps_deleted.load(Ordering::Relaxed);
        bar.set_position(done);
        if done >= target && loops.submitted.load(Ordering::Relaxed) >= target {
            break t0.elapsed();
        } else if t0.elapsed() > options.timeout {
            bail!("the benchmark did not finish within {} s ({done}/{target} steps)", options.timeout.as_secs());
        }
        if loops.broken() {
            bail!("a scheduler or executor loop stopped early ({done}/{target} steps)");
        }
    };
    bar.finish_and_clear();
    Ok(Finished { elapsed, per_minute: Vec::new(), minutes: Readings::default() })
}

/// Soak: runs `minutes` minutes, counting the steps finished in each and reading it
/// [`READ_DELAY`] after it ends, on a connection of its own (the loops go on meanwhile; the
/// time measured ends with the last minute).
async fn soak(loops: &Loops, minutes: u32, before: &Before, scratch: &ScratchDb) -> anyhow::Result<Finished> {
    let check = pool(&scratch.connect_options(), 1).await.context("cannot connect to the scratch database")?;
    let finished = each_minute(loops, minutes, before, &check).await;
    check.close().await;
    finished
}

async fn each_minute(loops: &Loops, minutes: u32, before: &Before, check: &PgPool) -> anyhow::Result<Finished> {
    let bar = progress_bar(None);
    let (mut per_minute, mut readings) = (Vec::new(), Readings::default());
    let (mut counted, mut elapsed) = (0, Duration::ZERO);
    for minute in 1..=minutes {
        let end = before.t0 + MINUTE * minute;
        let done = progress_until(loops, &bar, end).await?;
        elapsed = before.t0.elapsed();
        let n = done - counted;
        per_minute.push(n);
        counted = done;
        progress_until(loops, &bar, end + READ_DELAY).await?;
        let pruned = loops.scheduler_counters(minute).await?.pruned;
        let (latency, history) = readings.read(check, before.t0_db, minute, pruned).await?;
        let ms = |v: Option<f64>| v.map_or("n/a".to_owned(), |v| format!("{v:.1}"));
        // Printed even when stderr is not a terminal (a hidden bar drops `println`).
        bar.suspend(|| {
            eprintln!(
                "minute {minute:>3}: {n} steps, {:.0} steps/s, due→claimed p50 {} p99 {} ms; rows: {} steps, {} attempts, {} runs, {} dead ({:.0} MiB); {} runs pruned",
                n as f64 / 60.0,
                ms(latency.p50),
                ms(latency.p99),
                history.steps_rows,
                history.attempts_rows,
                history.runs_rows,
                history.dead_rows,
                history.history_mb,
                history.runs_pruned,
            )
        });
    }
    bar.finish_and_clear();
    Ok(Finished { elapsed, per_minute, minutes: readings })
}

/// Shows progress until `end`; returns the steps finished by then.
async fn progress_until(loops: &Loops, bar: &ProgressBar, end: Instant) -> anyhow::Result<u64> {
    loop {
        let done = loops.stats.steps_deleted.load(Ordering::Relaxed);
        bar.set_position(done);
        if loops.broken() {
            bail!("a scheduler or executor loop stopped early ({done} steps)");
        }
        let now = Instant::now();
        if now >= end {
            return Ok(done);
        }
        tokio::time::sleep_until(end.min(now + Duration::from_millis(50))).await;
    }
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
