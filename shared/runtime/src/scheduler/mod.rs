//! The scheduler: lease due steps in batches and send them, up to `RARA_STEPS_PER_MESSAGE`
//! steps per message (identifiers only). Entries that fail to send have their steps' leases
//! released at once, so the steps are due again instead of waiting for the reaper. Between
//! passes it waits for a `NOTIFY` on [`rara_store::DUE_CHANNEL`] or the poll interval,
//! whichever comes first.
//!
//! Beside the lease rounds, on timers of its own, its maintenance: reap expired leases every
//! `RARA_REAP_INTERVAL_MS`; refresh the statistics of hot tables that grew past them
//! ([`rara_store::statistics`]) every [`STATISTICS_INTERVAL`]; delete a slice of the finished
//! runs older than the retention ([`rara_store::retention`]) every [`PRUNE_INTERVAL`]; turn the
//! console's triggers off once no console registration lasts every [`CONSOLE_INTERVAL`]. A
//! running scheduler ([`Scheduler::run`]) does its maintenance in a task of its own, so that
//! a prune or an ANALYZE never delays a lease round; a single [`Scheduler::pass`] does what
//! is due first, then leases.
//!
//! # Layout
//!
//! - this file: the [`Scheduler`], its passes ([`Scheduler::run_until`]) and their errors.
//! - `lease.rs`: one lease round: lease, pack the steps into messages, release the unsent.
//! - `send.rs`: sending a round's messages, given up at the cut.
//! - `maintenance.rs`: reap, statistics, retention and the console's triggers, on timers.
//! - `schedules.rs`: the round of schedules: their due slots fired, skipped or missed.
//! - `listen.rs`: the wake-ups on [`rara_store::DUE_CHANNEL`].
//! - `trace.rs`: the spans of a round (lease, send, each attempt's `rara.schedule`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rara_queue::Queue;
use rara_store::Store;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use crate::burst::Burst;
use crate::metrics::Counters;
use crate::settings::Settings;

mod lease;
mod listen;
mod maintenance;
mod schedules;
mod send;
mod trace;

pub use maintenance::{CONSOLE_INTERVAL, EVENT_RETENTION_SECONDS, PRUNE_INTERVAL, STATISTICS_INTERVAL, WAIT_INTERVAL};
pub use schedules::{SCHEDULE_BATCH, SCHEDULE_INTERVAL, SLOTS_PER_ROUND};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] rara_store::Error),
    #[error(transparent)]
    Queue(#[from] rara_queue::Error),
    /// A schedule's run's large inputs could not be written to the artifact store.
    #[error(transparent)]
    Inputs(#[from] rara_operator::inputs::Error),
}

impl Error {
    /// Whether trying again later may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Store(e) => e.is_transient(),
            Error::Queue(_) => true,
            Error::Inputs(rara_operator::inputs::Error::Store(e)) => e.is_transient(),
            Error::Inputs(rara_operator::inputs::Error::Artifacts { source, .. }) => source.is_transient(),
        }
    }
}

#[derive(Clone)]
pub struct Scheduler {
    store: Store,
    queue: Arc<dyn Queue>,
    settings: Arc<Settings>,
    /// When the reaper last ran (`None`: never, so the next pass reaps).
    last_reap: Arc<Mutex<Option<Instant>>>,
    /// When the statistics were last checked (`None`: never).
    last_statistics: Arc<Mutex<Option<Instant>>>,
    /// When finished runs were last pruned (`None`: never).
    last_prune: Arc<Mutex<Option<Instant>>>,
    /// When the console's triggers were last checked (`None`: never).
    last_console: Arc<Mutex<Option<Instant>>>,
    /// When the maintenance last pruned `flow_keys`.
    last_flow_keys: Arc<Mutex<Option<Instant>>>,
    /// When the last round of durable waits ran.
    last_waits: Arc<Mutex<Option<Instant>>>,
    /// When the last round of schedules ran.
    last_schedules: Arc<Mutex<Option<Instant>>>,
    /// The in-process executors, for planning a schedule's runs as submit plans them (built at
    /// the first slot that fires; `None` if they cannot be).
    builtins: Arc<std::sync::OnceLock<Option<rara_domain::registry::Registry>>>,
    /// Failed sends to the queue, logged once per burst.
    sends: Arc<Mutex<Burst>>,
    /// The artifact store (`RARA_ARTIFACTS_URI`): pruned runs' objects are deleted from it, a
    /// schedule's run's large inputs written to it.
    artifacts: Option<Arc<dyn rara_artifacts::ArtifactStore>>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler").field("worker", &self.settings.core.worker_id).finish_non_exhaustive()
    }
}

impl Scheduler {
    /// The same scheduler deleting pruned runs' objects from `store` after their rows, and
    /// writing there the inputs of a schedule's run beyond `RARA_INLINE_OUTPUT_BYTES`.
    pub fn with_artifacts(mut self, store: Arc<dyn rara_artifacts::ArtifactStore>) -> Self {
        self.artifacts = Some(store);
        self
    }

    pub fn new(store: Store, queue: Arc<dyn Queue>, settings: Arc<Settings>) -> Self {
        let sends = Arc::new(Mutex::new(Burst::new("send", queue.peer())));
        Scheduler {
            store,
            queue,
            settings,
            last_reap: Arc::default(),
            last_statistics: Arc::default(),
            last_prune: Arc::default(),
            last_console: Arc::default(),
            last_flow_keys: Arc::default(),
            last_waits: Arc::default(),
            last_schedules: Arc::default(),
            builtins: Arc::default(),
            sends,
            artifacts: None,
        }
    }

    /// One pass: the maintenance that is due (reap, statistics, prune), then lease and send
    /// until nothing is due.
    pub async fn pass(&self) -> Result<Counters, Error> {
        let mut counters = self.maintain().await?;
        counters += self.lease_rounds(&CancellationToken::new()).await?;
        Ok(counters)
    }

    /// Lease rounds until a short one (nothing more is due right now); their sends are given
    /// up when `cut` fires: their leases are released at once (fenced by token), so a silent
    /// SQS peer holds no step past the cut.
    async fn lease_rounds(&self, cut: &CancellationToken) -> Result<Counters, Error> {
        let mut counters = Counters::default();
        loop {
            let round = self.lease_round(cut).await?;
            counters += round;
            if round.leased < u64::from(self.settings.lease_batch) || cut.is_cancelled() {
                return Ok(counters);
            }
        }
    }

    /// Where a schedule's run's inputs beyond the inline bound go, when there is a store.
    fn inputs_offload(&self) -> Option<rara_operator::inputs::Offload> {
        let store = self.artifacts.clone()?;
        Some(rara_operator::inputs::Offload { store, inline_bytes: self.settings.inline_output_bytes })
    }

    /// The in-process executors (see the field `builtins`).
    fn builtins(&self) -> Option<&rara_domain::registry::Registry> {
        self.builtins.get_or_init(|| rara_builtins::registry().ok()).as_ref()
    }

    /// One Postgres call, bounded client-side ([`Timeouts::db_call`](crate::timeouts::Timeouts::db_call)):
    /// a pass facing a silent Postgres fails and the next one tries again.
    async fn db<T>(&self, call: impl Future<Output = Result<T, rara_store::Error>>) -> Result<T, rara_store::Error> {
        crate::timeouts::db_call(self.settings.timeouts.db_call(), call).await
    }

    /// Passes of lease rounds until `budget` is spent or `stop` fires (`budget = None`: until
    /// `stop`), and beside them the maintenance on its timers, in a task of its own (another
    /// connection of the pool). Between passes it waits up to `scheduler_poll`, and less when
    /// a `NOTIFY` on [`rara_store::DUE_CHANNEL`] says steps became due
    /// (`RARA_SCHEDULER_LISTEN`). A pass that fails for a passing reason (a dropped
    /// connection, a restarting database) is logged and tried again at the next wake-up; any
    /// other error ends the run. A failing maintenance call is logged once per burst and
    /// tried again on its timer.
    pub async fn run(&self, budget: Option<Duration>, stop: CancellationToken) -> Result<Counters, Error> {
        self.run_until(budget, stop, None).await
    }

    /// [`run`](Self::run) with a hard deadline (a Lambda invocation's end minus the margin):
    /// a pass still sending then gives its sends up and releases their leases, so the
    /// invocation answers in time whatever SQS does. The shutdown grace after `stop` is a
    /// deadline of the same kind.
    pub async fn run_until(
        &self,
        budget: Option<Duration>,
        stop: CancellationToken,
        deadline: Option<Instant>,
    ) -> Result<Counters, Error> {
        let end = budget.map(|b| Instant::now() + b);
        let cut = CancellationToken::new();
        let _timer = AbortOnDropHandle::new(tokio::spawn({
            let (stop, cut, grace) = (stop.clone(), cut.clone(), self.settings.timeouts.shutdown_grace);
            async move {
                let hard = async {
                    match deadline {
                        Some(deadline) => tokio::time::sleep_until(deadline).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = hard => {}
                    _ = async { stop.cancelled().await; tokio::time::sleep(grace).await } => {}
                }
                cut.cancel();
            }
        }));
        let woken = Arc::new(Notify::new());
        let listening = stop.child_token();
        let listener = self.settings.scheduler_listen.then(|| self.spawn_listener(woken.clone(), listening.clone()));
        let maintaining = CancellationToken::new();
        let mut maintenance = AbortOnDropHandle::new(tokio::spawn({
            let (scheduler, done) = (self.clone(), maintaining.clone());
            async move { scheduler.maintain_until(done).await }
        }));
        let result = self.passes(end, &woken, &stop, &cut).await;
        listening.cancel();
        maintaining.cancel();
        // The maintenance call under way finishes (each is bounded like any Postgres call),
        // but not past the cut: then it is given up, like a pass.
        let maintained = tokio::select! {
            biased;
            counters = &mut maintenance => counters.unwrap_or_default(),
            _ = cut.cancelled() => {
                maintenance.abort();
                Counters::default()
            }
        };
        if let Some(task) = listener {
            let _ = task.await;
        }
        let mut total = result?;
        total += maintained;
        Ok(total)
    }

    async fn passes(
        &self,
        end: Option<Instant>,
        woken: &Notify,
        stop: &CancellationToken,
        cut: &CancellationToken,
    ) -> Result<Counters, Error> {
        let mut total = Counters::default();
        let mut database = Burst::new("scheduler pass", crate::burst::postgres_peer(self.store.pool()));
        let mut queue = Burst::new("scheduler pass", self.queue.peer());
        loop {
            // A pass still under way shortly after the cut (Postgres silent: nothing can be
            // released) is given up; what it leased comes back after the delivery timeout.
            match crate::interrupt::after_interrupt(cut, self.lease_rounds(cut)).await {
                Some(Ok(counters)) => {
                    database.succeeded();
                    queue.succeeded();
                    total += counters;
                }
                Some(Err(e @ Error::Store(_))) if e.is_transient() => _ = database.failed(&e),
                Some(Err(e)) if e.is_transient() => _ = queue.failed(&e),
                Some(Err(e)) => return Err(e),
                None => {
                    tracing::error!(
                        "a scheduler pass did not finish after the cut (is Postgres answering?); giving it up"
                    );
                    return Ok(total);
                }
            }
            let now = Instant::now();
            if end.is_some_and(|end| now >= end) || cut.is_cancelled() || stop.is_cancelled() {
                return Ok(total);
            }
            let wake =
                end.map_or(now + self.settings.scheduler_poll, |end| end.min(now + self.settings.scheduler_poll));
            // A stop that came with a wake-up stops: no pass after it.
            tokio::select! {
                biased;
                _ = stop.cancelled() => return Ok(total),
                _ = tokio::time::sleep_until(wake) => {}
                _ = woken.notified() => total.wakeups += 1,
            }
        }
    }
}
