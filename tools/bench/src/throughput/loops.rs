//! [`Loops`]: the scheduler, the executor loops and the submitter while they run, and how
//! they stop.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use anyhow::{Context, bail};
use rara_runtime::metrics::Counters;
use rara_runtime::scheduler::Scheduler;
use rara_runtime::settings::Settings;
use rara_store::Store;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::setup::{Pools, QueueSetup};
use super::{runner_options, spawn_executors};
use crate::counted::{Counted, Instants, QueueStats};
use crate::minutes::{MINUTE, READ_DELAY};
use crate::options::{Mode, Options};
use crate::workload::Submitter;

/// The running loops and what they share.
pub(super) struct Loops {
    pub(super) stop: CancellationToken,
    pub(super) stats: Arc<QueueStats>,
    pub(super) submitted: Arc<AtomicU64>,
    /// `rate`: when each step's message was sent, and when each run's submission started.
    pub(super) sent_at: Arc<Instants>,
    pub(super) run_due_at: Arc<Instants>,
    pub(super) scheduler: JoinHandle<anyhow::Result<Counters>>,
    /// Soak: the last minute whose scheduler invocation ended, and the counters summed so far.
    pub(super) scheduler_minutes: Option<watch::Receiver<(u32, Counters)>>,
    pub(super) executors: Vec<JoinHandle<anyhow::Result<Counters>>>,
    pub(super) submitter: Option<JoinHandle<anyhow::Result<()>>>,
}

impl Loops {
    pub(super) fn start(
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
    pub(super) async fn scheduler_counters(&self, minute: u32) -> anyhow::Result<Counters> {
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
    pub(super) fn broken(&self) -> bool {
        self.scheduler.is_finished() || self.executors.iter().any(|t| t.is_finished())
    }

    /// Stops the loops and returns the scheduler's counters.
    pub(super) async fn stop(self) -> anyhow::Result<Counters> {
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
