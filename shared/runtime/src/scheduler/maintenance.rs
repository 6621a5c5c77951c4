//! The scheduler's maintenance, on timers of its own beside the lease rounds: reap expired
//! leases every `RARA_REAP_INTERVAL_MS`, refresh the statistics of hot tables that grew past
//! them, delete a slice of the finished runs past the retention, delete a slice of the
//! `flow_keys` rows no lease needs (and events past their retention), turn the console's
//! triggers off once no console listens, and a round of durable waits every [`WAIT_INTERVAL`].

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Error, Scheduler};
use crate::burst::Burst;
use crate::metrics::Counters;

/// How often a running scheduler checks whether a hot table outgrew its planner statistics
/// (one catalog query; at most `RARA_REAP_INTERVAL_MS`). A fresh database's first batches
/// prepare the claim and the outcome while `step_attempts` holds a few rows, and each
/// connection keeps the generic plan made then (a sequential scan) until an ANALYZE of the
/// table: checked only with the reaper, a short benchmark ran on that plan from start to end.
pub const STATISTICS_INTERVAL: Duration = Duration::from_secs(1);

/// How often a running scheduler deletes finished runs past the retention (one statement of
/// at most `RARA_PRUNE_BATCH_SIZE` runs; at most `RARA_REAP_INTERVAL_MS`). Each call deletes
/// what finished in about the last second rather than a reap interval's worth at once, so
/// that no single delete holds the scheduler's connection long under a high step rate.
pub const PRUNE_INTERVAL: Duration = Duration::from_secs(1);

/// How often a running scheduler turns the console's triggers off when no console listens any
/// more (one catalog query; at most `RARA_REAP_INTERVAL_MS`): a console whose container froze
/// lets its registration lapse (60 s) without ending it, and the triggers cost every statement
/// that writes `steps` while they are on (migration `…000016`).
pub const CONSOLE_INTERVAL: Duration = Duration::from_secs(30);

/// How often a running scheduler deletes rows of `flow_keys` that no lease needs any more (one
/// statement of at most [`FLOW_KEYS_SLICE`] rows; at most `RARA_REAP_INTERVAL_MS`): authors
/// choose concurrency keys, and every key leased once has a row.
pub const FLOW_KEYS_INTERVAL: Duration = Duration::from_secs(10);

/// How often a running scheduler does a round of durable waits (at most `RARA_REAP_INTERVAL_MS`):
/// start the due waits, decide those whose timer or timeout came, apply what was decided. A
/// timer completes within this of its time, plus one lease round for what follows it.
pub const WAIT_INTERVAL: Duration = Duration::from_millis(250);

/// The most rows each part of a round of waits takes (more wait for the next round).
pub const WAIT_BATCH: u32 = 1000;

/// How long events are kept for the waits that begin after them (docs/src/guide/waits.md).
pub const EVENT_RETENTION_SECONDS: u64 = 7 * 24 * 3600;

/// The most `flow_keys` rows one pass deletes.
pub const FLOW_KEYS_SLICE: u32 = 1000;

/// The shortest wait of the maintenance task between two looks at its timers.
const MAINTENANCE_TICK: Duration = Duration::from_millis(100);

/// Forgets when the task of `last` ran: it is tried again at the next look.
fn forget(last: &Mutex<Option<Instant>>) {
    if let Ok(mut last) = last.lock() {
        *last = None;
    }
}

/// Whether the task whose last run `last` records is due after `interval`; marks it as run.
fn due(last: &Mutex<Option<Instant>>, interval: Duration) -> bool {
    let Ok(mut last) = last.lock() else { return true };
    let due = last.is_none_or(|t| t.elapsed() >= interval);
    if due {
        *last = Some(Instant::now());
    }
    due
}

impl Scheduler {
    /// Whether the reaper is due: never ran, or ran `reap_interval` ago. Marks it as run.
    pub(super) fn reap_due(&self) -> bool {
        due(&self.last_reap, self.settings.reap_interval)
    }

    /// The maintenance whose timer is due: reap (a failure is returned, and the reaper tries
    /// again at the next look), the statistics check, a slice of the retention and the console's
    /// triggers (their failures are logged: they only slow things down or cost space).
    pub(super) async fn maintain(&self) -> Result<Counters, Error> {
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
        if due(&self.last_flow_keys, FLOW_KEYS_INTERVAL.min(reap_interval)) {
            self.prune_flow_keys().await;
        }
        if due(&self.last_waits, WAIT_INTERVAL.min(reap_interval)) {
            self.waits(&mut counters).await?;
        }
        if due(&self.last_schedules, super::SCHEDULE_INTERVAL.min(reap_interval)) {
            self.schedules(&mut counters).await.inspect_err(|_| forget(&self.last_schedules))?;
        }
        Ok(counters)
    }

    /// [`maintain`](Self::maintain) on its timers until `done` fires (checked between calls,
    /// so a call under way finishes), beside the lease rounds of [`run_until`](Self::run_until).
    pub(super) async fn maintain_until(&self, done: CancellationToken) -> Counters {
        let mut total = Counters::default();
        let mut database = Burst::new("scheduler maintenance", crate::burst::postgres_peer(self.store.pool()));
        let tick = STATISTICS_INTERVAL
            .min(PRUNE_INTERVAL)
            .min(WAIT_INTERVAL)
            .min(self.settings.reap_interval)
            .max(MAINTENANCE_TICK);
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

    /// One round of durable waits ([`rara_store::waits`]), and beside the flow keys' slice, a
    /// slice of the events past their retention. A failing round is returned (like the reaper's)
    /// and tried again at the next look.
    async fn waits(&self, counters: &mut Counters) -> Result<(), Error> {
        let round = self.db(self.store.wait_round(WAIT_BATCH)).await.inspect_err(|_| {
            if let Ok(mut last) = self.last_waits.lock() {
                *last = None;
            }
        })?;
        counters.waits_started += round.started;
        counters.waits_decided += round.decided;
        counters.waits_applied += round.applied;
        counters.waits_timed_out += round.timed_out;
        self.deadlines(counters).await?;
        self.orphans(&round.ended, counters).await?;
        counters.waits_ended += round.ended.len() as u64;
        super::trace::emit_waits(&round.ended);
        if round != rara_store::waits::WaitRound::default() {
            let (started, decided, applied, ended) = (round.started, round.decided, round.applied, round.ended.len());
            tracing::info!(started, decided, timed_out = round.timed_out, applied, ended, "waits");
        }
        Ok(())
    }

    /// The runs past their deadline (at most [`WAIT_BATCH`] a round), timed out; then the
    /// executors of their detached attempts are told (with the remote credential the
    /// scheduler has: each within `DETACHED_CANCEL_TIMEOUT`). Attached attempts hear it from
    /// their holders, as of any cancel.
    async fn deadlines(&self, counters: &mut Counters) -> Result<(), Error> {
        let (runs, detached) = self.db(self.store.time_out_runs(WAIT_BATCH)).await?;
        if runs.is_empty() {
            return Ok(());
        }
        counters.runs_timed_out += runs.len() as u64;
        tracing::info!(runs = runs.len(), detached = detached.len(), "runs past their deadline timed out");
        self.tell(detached, "the run passed its deadline (RUN_TIMED_OUT)").await;
        Ok(())
    }

    /// The child runs of the child workflow waits that ended otherwise than by their child
    /// (the parent step cancelled, timed out, failed), cancelled if still running; their
    /// detached attempts told as [`deadlines`](Self::deadlines) tells them. A child's own
    /// children follow at the next round (their parent step is cancelled with it).
    async fn orphans(&self, ended: &[rara_store::waits::EndedWait], counters: &mut Counters) -> Result<(), Error> {
        let children: Vec<uuid::Uuid> = ended.iter().filter_map(|w| w.child_run_id).collect();
        let (runs, detached) = self.db(self.store.cancel_children(&children)).await?;
        if runs.is_empty() {
            return Ok(());
        }
        counters.children_cancelled += runs.len() as u64;
        tracing::info!(
            runs = runs.len(),
            detached = detached.len(),
            "child runs cancelled: their parent step stopped waiting"
        );
        self.tell(detached, "its parent step no longer waits for it (CANCELLED)").await;
        Ok(())
    }

    /// Tells the executors of `detached` attempts that their runs were cancelled (`why`), each
    /// within `DETACHED_CANCEL_TIMEOUT`, with the remote credential the scheduler has.
    async fn tell(&self, detached: Vec<rara_store::detach::DetachedAttempt>, why: &str) {
        for (attempt, told) in rara_operator::cancel::tell_with(&self.settings.remote_security, detached, why).await {
            if let Err(e) = told {
                tracing::warn!(step_id = %attempt.step_id, error = %e, "could not tell a detached attempt its run was cancelled");
            }
        }
    }

    /// One slice of `flow_keys`' idle rows. They only cost space: a failure here is logged,
    /// and the next pass tries again.
    async fn prune_flow_keys(&self) {
        match self.db(self.store.prune_flow_keys(FLOW_KEYS_SLICE)).await {
            Ok(0) => {}
            Ok(rows) => tracing::info!(rows, "deleted flow_keys rows of keys with nothing due or held"),
            Err(e) => tracing::warn!(error = %e, "could not delete idle flow_keys rows"),
        }
        match self.db(self.store.prune_events(EVENT_RETENTION_SECONDS, FLOW_KEYS_SLICE)).await {
            Ok(0) => {}
            Ok(rows) => tracing::info!(rows, "deleted events past their retention"),
            Err(e) => tracing::warn!(error = %e, "could not delete events past their retention"),
        }
    }

    /// One slice of the retention (`RARA_RETENTION_DAYS`): at most `RARA_PRUNE_BATCH_SIZE`
    /// runs, bounded by `statement_timeout`.
    /// History only costs space: a failure here is logged, and the next pass tries again.
    async fn prune(&self, counters: &mut Counters) {
        let Some(retention) = self.settings.retention else { return };
        let (batch, how, objects) = (self.settings.prune_batch, self.settings.prune, self.artifacts.is_some());
        match self.db(self.store.prune_queueing(retention, batch, how, objects)).await {
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
        if let Some(artifacts) = &self.artifacts {
            // Not under the Postgres call's bound: the store's calls have the SDK's deadlines.
            let pass =
                crate::pruned_objects::delete_pruned(&self.store, &**artifacts, crate::pruned_objects::RUNS_PER_PASS);
            match pass.await {
                Ok(pass) if pass.objects > 0 => {
                    tracing::info!(runs = pass.runs, objects = pass.objects, "deleted pruned runs' objects")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "could not read the pruned runs' objects to delete"),
            }
        }
    }
}
