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

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rara_queue::{MessageStep, Outgoing, Queue, StepMessage};
use rara_store::{DueListener, Store};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use crate::burst::Burst;
use crate::metrics::Counters;
use crate::settings::Settings;

mod trace;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] rara_store::Error),
    #[error(transparent)]
    Queue(#[from] rara_queue::Error),
}

impl Error {
    /// Whether trying again later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Store(e) => e.is_retryable(),
            Error::Queue(_) => true,
        }
    }
}

/// How often a running scheduler checks whether a hot table outgrew its planner statistics
/// (one catalog query; at most `RARA_REAP_INTERVAL_MS`). A fresh database's first batches
/// prepare the claim and the outcome while `step_attempts` holds a few rows, and each
/// connection keeps the generic plan made then (a sequential scan) until an ANALYZE of the
/// table: checked with the reaper, every 5 s, that was all of a 20,000-step benchmark run.
pub const STATISTICS_INTERVAL: Duration = Duration::from_secs(1);

/// How often a running scheduler deletes finished runs past the retention (one statement of
/// at most `RARA_PRUNE_BATCH_SIZE` runs; at most `RARA_REAP_INTERVAL_MS`). Each call deletes
/// what finished in about the last second rather than a reap interval's worth at once: at
/// 3,000 steps/s one call every 5 s deleted ~15,000 steps and took ~217 ms.
pub const PRUNE_INTERVAL: Duration = Duration::from_secs(1);

/// How often a running scheduler turns the console's triggers off when no console listens any
/// more (one catalog query; at most `RARA_REAP_INTERVAL_MS`): a console whose container froze
/// lets its registration lapse (60 s) without ending it, and the triggers cost every statement
/// that writes `steps` while they are on (migration `…000016`).
pub const CONSOLE_INTERVAL: Duration = Duration::from_secs(30);

/// The shortest wait of the maintenance task between two looks at its timers.
const MAINTENANCE_TICK: Duration = Duration::from_millis(100);

/// Whether the task whose last run `last` records is due after `interval`; marks it as run.
fn due(last: &Mutex<Option<Instant>>, interval: Duration) -> bool {
    let Ok(mut last) = last.lock() else { return true };
    let due = last.is_none_or(|t| t.elapsed() >= interval);
    if due {
        *last = Some(Instant::now());
    }
    due
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
    /// Failed sends to the queue, logged once per burst.
    sends: Arc<Mutex<Burst>>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler").field("worker", &self.settings.core.worker_id).finish_non_exhaustive()
    }
}

impl Scheduler {
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
            sends,
        }
    }

    /// Whether the reaper is due: never ran, or ran `reap_interval` ago. Marks it as run.
    fn reap_due(&self) -> bool {
        due(&self.last_reap, self.settings.reap_interval)
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

    /// The maintenance whose timer is due: reap (a failure is returned, and the reaper tries
    /// again at the next look), the statistics check, a slice of the retention and the console's
    /// triggers (their failures are logged: they only slow things down or cost space).
    async fn maintain(&self) -> Result<Counters, Error> {
        let mut counters = Counters::default();
        if self.reap_due() {
            self.reap(&mut counters).await?;
        }
        let reap_interval = self.settings.reap_interval;
        if due(&self.last_statistics, STATISTICS_INTERVAL.min(reap_interval)) {
            self.refresh_statistics(&mut counters).await;
        }
        if self.settings.retention.is_some() && due(&self.last_prune, PRUNE_INTERVAL.min(reap_interval)) {
            self.prune(&mut counters).await;
        }
        if due(&self.last_console, CONSOLE_INTERVAL.min(reap_interval)) {
            self.quiet_console().await;
        }
        Ok(counters)
    }

    /// [`maintain`](Self::maintain) on its timers until `done` fires (checked between calls,
    /// so a call under way finishes), beside the lease rounds of [`run_until`](Self::run_until).
    async fn maintain_until(&self, done: CancellationToken) -> Counters {
        let mut total = Counters::default();
        let mut database = Burst::new("scheduler maintenance", crate::burst::postgres_peer(self.store.pool()));
        let tick = STATISTICS_INTERVAL.min(PRUNE_INTERVAL).min(self.settings.reap_interval).max(MAINTENANCE_TICK);
        while !done.is_cancelled() {
            match self.maintain().await {
                Ok(counters) => {
                    database.succeeded();
                    total += counters;
                }
                Err(e) => _ = database.failed(&e),
            }
            tokio::select! {
                _ = tokio::time::sleep(tick) => {}
                _ = done.cancelled() => {}
            }
        }
        total
    }

    /// One Postgres call, bounded client-side ([`Timeouts::db_call`](crate::timeouts::Timeouts::db_call)):
    /// a pass facing a silent Postgres fails and the next one tries again.
    async fn db<T>(&self, call: impl Future<Output = Result<T, rara_store::Error>>) -> Result<T, rara_store::Error> {
        crate::timeouts::db_call(self.settings.timeouts.db_call(), call).await
    }

    async fn reap(&self, counters: &mut Counters) -> Result<(), Error> {
        let reaped = self.db(self.store.reap_expired(self.settings.reap_batch)).await.inspect_err(|_| {
            // Try again at the next look at the timers rather than after a whole interval.
            if let Ok(mut last) = self.last_reap.lock() {
                *last = None;
            }
        })?;
        counters.reaper_runs += 1;
        counters.reaped = reaped.total();
        if reaped.total() > 0 {
            tracing::info!(
                released_leased = reaped.released_leased,
                released_running = reaped.released_running,
                failed = reaped.failed,
                "reaped expired leases"
            );
        }
        Ok(())
    }

    /// Analyzes the hot tables that grew to twice the rows their statistics saw.
    /// Stale statistics only slow things down: a failure here is logged, not fatal.
    async fn refresh_statistics(&self, counters: &mut Counters) {
        counters.statistics_checks += 1;
        match self.db(self.store.refresh_grown_statistics()).await {
            Ok(tables) if !tables.is_empty() => {
                counters.statistics_refreshes += tables.len() as u64;
                tracing::info!(tables = tables.join(","), "analyzed tables that outgrew their planner statistics");
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "could not refresh planner statistics"),
        }
    }

    /// Turns the console's triggers off if no console listens any more. Triggers left on only
    /// cost time: a failure here is logged, and the next check tries again.
    async fn quiet_console(&self) {
        match self.db(self.store.quiet_console()).await {
            Ok(true) => tracing::info!("no console listens any more: its triggers are off"),
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "could not turn the console's triggers off"),
        }
    }

    /// One slice of the retention (`RARA_RETENTION_DAYS`): at most `RARA_PRUNE_BATCH_SIZE`
    /// runs, bounded by `statement_timeout`.
    /// History only costs space: a failure here is logged, and the next pass tries again.
    async fn prune(&self, counters: &mut Counters) {
        let Some(retention) = self.settings.retention else { return };
        match self.db(self.store.prune(retention, self.settings.prune_batch, self.settings.prune)).await {
            Ok(pruned) => {
                counters.pruned += pruned.runs;
                if pruned.runs > 0 {
                    tracing::info!(
                        runs = pruned.runs,
                        steps = pruned.steps,
                        "deleted finished runs past the retention"
                    );
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not delete finished runs past the retention"),
        }
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
            match crate::batch::after_interrupt(cut, self.lease_rounds(cut)).await {
                Some(Ok(counters)) => {
                    database.succeeded();
                    queue.succeeded();
                    total += counters;
                }
                Some(Err(e @ Error::Store(_))) if e.is_retryable() => _ = database.failed(&e),
                Some(Err(e)) if e.is_retryable() => _ = queue.failed(&e),
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
            tokio::select! {
                _ = tokio::time::sleep_until(wake) => {}
                _ = woken.notified() => total.wakeups += 1,
                _ = stop.cancelled() => return Ok(total),
            }
        }
    }

    /// Listens on [`rara_store::DUE_CHANNEL`] on a connection of its own (the passes keep
    /// the pool) and wakes the loop on every notification. Notifications that arrive during
    /// a pass leave one wake-up pending, so none is missed and a burst costs one extra pass.
    /// While listening fails the loop still polls; the listener tries again every poll
    /// interval and wakes the loop once it is back (notifications may have been missed).
    fn spawn_listener(&self, woken: Arc<Notify>, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
        let store = self.store.clone();
        let retry = self.settings.scheduler_poll.max(Duration::from_millis(100));
        tokio::spawn(async move {
            let mut listener: Option<DueListener> = None;
            let mut failing = false;
            loop {
                tokio::select! {
                    result = next_notification(&store, &mut listener) => match result {
                        Ok(()) => {
                            failing = false;
                            woken.notify_one();
                        }
                        Err(e) => {
                            if !failing {
                                tracing::warn!(error = %e, "cannot listen for due steps; polling until it can");
                            }
                            failing = true;
                            listener = None;
                            tokio::select! {
                                _ = tokio::time::sleep(retry) => {}
                                _ = stop.cancelled() => break,
                            }
                        }
                    },
                    _ = stop.cancelled() => break,
                }
            }
            // Closing waits for its connection: a silent Postgres gets the last-call bound.
            if let Some(listener) = listener {
                let _ = tokio::time::timeout(crate::batch::LAST_CALL_BOUND, listener.close()).await;
            }
        })
    }

    async fn lease_round(&self, cut: &CancellationToken) -> Result<Counters, Error> {
        let core = &self.settings.core;
        // The lease lasts until the message can be claimed (a backlog included), not for an
        // execution: a message waiting in the queue is never sent twice.
        let lease_started = SystemTime::now();
        let leased = self
            .db(self.store.lease_due(&core.worker_id, self.settings.lease_batch, self.settings.delivery_timeout))
            .await?;
        let lease_ended = SystemTime::now();
        if leased.is_empty() {
            return Ok(Counters { lease_rounds: 1, ..Counters::default() });
        }
        let traces = trace::RoundTrace::of(&leased);
        // Message `i` names the steps of chunk `i`.
        let chunks: Vec<&[rara_store::lease::Leased]> = leased.chunks(self.settings.steps_per_message).collect();
        let messages: Vec<Outgoing> = chunks
            .iter()
            .enumerate()
            .map(|(i, chunk)| {
                let steps: Vec<MessageStep> = chunk
                    .iter()
                    .map(|l| MessageStep {
                        message: StepMessage::new(l.step_id, l.lease_token),
                        traceparent: Some(traces.traceparent(l.step_id)),
                    })
                    .collect();
                Outgoing {
                    id: i.to_string(),
                    body: rara_queue::encode_steps(&steps),
                    traceparent: steps.first().and_then(|s| s.traceparent.clone()),
                    delay: Duration::ZERO,
                }
            })
            .collect();
        let send_started = SystemTime::now();
        let sent = tokio::select! {
            sent = self.queue.send(&messages) => Some(sent),
            _ = cut.cancelled() => None,
        };
        let failed_ids = match sent {
            Some(Ok(failed)) => {
                if let Ok(mut sends) = self.sends.lock() {
                    sends.succeeded();
                }
                failed
            }
            Some(Err(e)) => {
                // Logged once per burst (the leases are released each time).
                if let Ok(mut sends) = self.sends.lock() {
                    sends.failed(&format_args!("{e}; releasing the leases of the unsent messages"));
                }
                messages.iter().map(|m| m.id.clone()).collect()
            }
            None => {
                // Some may have been sent: releasing clears their tokens, so those messages
                // arrive stale and the steps are leased again with new ones.
                tracing::error!("sending step messages did not finish before the cut; releasing their leases");
                messages.iter().map(|m| m.id.clone()).collect()
            }
        };
        let unsent: Vec<(uuid::Uuid, uuid::Uuid)> = failed_ids
            .iter()
            .filter_map(|id| id.parse::<usize>().ok().and_then(|i| chunks.get(i)))
            .flat_map(|chunk| chunk.iter().map(|l| (l.step_id, l.lease_token)))
            .collect();
        let send_ended = SystemTime::now();
        let unsent_ids: std::collections::HashSet<uuid::Uuid> = unsent.iter().map(|(id, _)| *id).collect();
        let sent_ids = leased.iter().map(|l| l.step_id).filter(|id| !unsent_ids.contains(id));
        traces.emit(sent_ids, messages.len(), (lease_started, lease_ended), (send_started, send_ended));
        let released = if unsent.is_empty() { 0 } else { self.db(self.store.release(&unsent)).await? };
        for l in &leased {
            tracing::debug!(run_id = %l.run_id, step_id = %l.step_id, "leased");
        }
        Ok(Counters {
            lease_rounds: 1,
            leased: leased.len() as u64,
            sent: (leased.len() - unsent.len()) as u64,
            messages: (messages.len() - failed_ids.len().min(messages.len())) as u64,
            released,
            ..Counters::default()
        })
    }
}

/// Waits for the next notification, listening first when needed ([`Store::listen_due`]). A
/// fresh listener counts as a notification: anything sent while there was none is lost.
async fn next_notification(store: &Store, listener: &mut Option<DueListener>) -> Result<(), rara_store::Error> {
    match listener {
        Some(l) => l.recv().await,
        None => {
            *listener = Some(store.listen_due().await?);
            Ok(())
        }
    }
}
